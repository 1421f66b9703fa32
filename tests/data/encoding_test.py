"""Every reader of user text names the file and line of invalid UTF-8."""

import json

import pytest

from bert.data import classification_data as cd
from bert.data import ner_data
from bert.data.squad_examples import read_squad
from bert.data.errors import DataError


def write(tmp_path, name, data: bytes):
  path = tmp_path / name
  path.write_bytes(data)
  return str(path)


def test_invalid_utf8_is_named_in_every_reader(tmp_path):
  bad = b"caf\xe9"           # Latin-1, not UTF-8
  tsv = write(tmp_path, "train.tsv", b"sentence\tlabel\nfine\t1\n" + bad + b"\t0\n")
  with pytest.raises(DataError, match=r"train.tsv:3: not valid UTF-8 \(byte 0xe9"):
    cd.read_glue("sst-2", tsv)
  csv_path = write(tmp_path, "d.csv", b"text,label\n" + bad + b",pos\n")
  with pytest.raises(DataError, match=r"d.csv:2: not valid UTF-8"):
    cd.read_generic(csv_path, "text", label="label", labels=["pos"])
  conll = write(tmp_path, "x.conll", b"ok\tO\n\n" + bad + b"\tO\n")
  with pytest.raises(DataError, match=r"x.conll:3: not valid UTF-8"):
    ner_data.read_conll(conll)
  squad = write(tmp_path, "s.json", b'{"data": [\n{"title": "' + bad + b'"}]}')
  with pytest.raises(DataError, match=r"s.json:2: not valid UTF-8"):
    read_squad(squad)
  swag = write(tmp_path, "v.csv", b"sent1,sent2,ending0,ending1,ending2,ending3,label\n"
               + bad + b",b,c,d,e,f,0\n")
  with pytest.raises(DataError, match=r"v.csv:2: not valid UTF-8"):
    cd.read_swag(swag)


def test_bom_and_malformed_json(tmp_path):
  tsv = write(tmp_path, "bom.tsv", "\ufeffsentence\tlabel\nhello\t1\n".encode())
  assert cd.read_glue("sst-2", tsv)[0].text_a == "hello"
  broken = write(tmp_path, "b.json", b'{"data": [\n  {"title": "x",\n  oops]}')
  with pytest.raises(DataError, match=r"b.json:3: not valid JSON"):
    read_squad(broken)
  with pytest.raises(DataError, match=r"n.json: not a SQuAD json file"):
    read_squad(write(tmp_path, "n.json", json.dumps({"x": 1}).encode()))
