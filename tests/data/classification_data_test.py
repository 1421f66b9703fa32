"""GLUE and generic readers: real files, layouts, and clear errors."""

import json

import pytest

from bert.data import classification_data as cd
from conftest import shared_data


def test_mrpc_real_files():
  train = cd.read_glue("mrpc", shared_data("glue", "MRPC", "train.tsv"))
  dev = cd.read_glue("mrpc", shared_data("glue", "MRPC", "dev.tsv"), "dev")
  assert len(train) == 3668 and len(dev) == 408
  assert sum(e.label == "1" for e in train) == 2474
  assert sum(e.label == "1" for e in dev) == 279
  assert all(e.text_b for e in train)
  # '"' is an ordinary character, not a quote: rows keep it and stay aligned.
  quoted = [e for e in train if '"' in e.text_a + e.text_b]
  assert len(quoted) > 50
  assert not train[0].text_a.startswith("\ufeff")


def test_sst2_real_files():
  train = cd.read_glue("SST-2", shared_data("glue", "SST-2", "train.tsv"))
  dev = cd.read_glue("sst2", shared_data("glue", "SST-2", "dev.tsv"), "dev")
  assert len(train) == 67349 and len(dev) == 872
  assert sum(e.label == "1" for e in train) == 37569
  assert train[0].text_b is None


def write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_glue_errors_name_file_and_line(tmp_path):
  path = write(tmp_path, "train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
               "1\t1\t2\tA cat.\tA feline.\n0\t3\t4\tOnly three\n")
  with pytest.raises(cd.DataError, match=r"train.tsv:3: row has 4 column"):
    cd.read_glue("mrpc", path)
  path = write(tmp_path, "bad_label.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
               "yes\t1\t2\tA cat.\tA feline.\n")
  with pytest.raises(cd.DataError, match=r"bad_label.tsv:2: label 'yes' is not one of"):
    cd.read_glue("mrpc", path)
  path = write(tmp_path, "sts.tsv", "\t".join(["h"] * 10) + "\n"
               + "\t".join(["x"] * 9 + ["high"]) + "\n")
  with pytest.raises(cd.DataError, match=r"sts.tsv:2: regression label 'high'"):
    cd.read_glue("sts-b", path)
  for value in ("nan", "inf", "-Infinity"):   # float() parses these
    path = write(tmp_path, "sts_nan.tsv", "\t".join(["h"] * 10) + "\n" +
                 "\t".join(["x"] * 9 + ["1.5"]) + "\n" +
                 "\t".join(["x"] * 9 + [value]) + "\n")
    with pytest.raises(cd.DataError, match=rf"sts_nan.tsv:3: regression label "
                       rf"'{value}' is not a finite number"):
      cd.read_glue("sts-b", path)
  with pytest.raises(FileNotFoundError, match="missing.tsv"):
    cd.read_glue("mrpc", str(tmp_path / "missing.tsv"))
  with pytest.raises(cd.DataError, match="no examples"):
    cd.read_glue("mrpc", write(tmp_path, "empty.tsv", "header only\n"))


def test_qqp_short_rows_are_counted_and_skipped(tmp_path):
  path = write(tmp_path, "qqp.tsv", "id\tqid1\tqid2\tq1\tq2\tis_duplicate\n"
               "1\t1\t2\tWhy?\tHow?\t0\n2\t3\t4\tbroken row\n3\t5\t6\tA?\tB?\t1\n")
  messages = []
  examples = cd.read_glue("qqp", path, log=messages.append)
  assert [e.label for e in examples] == ["0", "1"]
  assert "skipped 1 row" in messages[0]


def test_generic_tsv_csv_jsonl(tmp_path):
  tsv = write(tmp_path, "d.tsv", "text\tlabel\nfine \"quoted\" text\tpos\nbad\tneg\n")
  csv_path = write(tmp_path, "d.csv", 'text,other,label\n"a, b",x,pos\nc,y,neg\n')
  jsonl = write(tmp_path, "d.jsonl", json.dumps(dict(text="hi", label="pos")) + "\n\n"
                + json.dumps(dict(text="yo", label="neg")) + "\n")
  for path in (tsv, csv_path, jsonl):
    examples = cd.read_generic(path, "text", label="label", labels=["neg", "pos"])
    assert [e.label for e in examples] == ["pos", "neg"]
  assert cd.read_generic(tsv, "text", label="label", labels=["neg", "pos"])[0].text_a \
      == 'fine "quoted" text'
  assert cd.read_generic(csv_path, "text", label="label",
                         labels=["neg", "pos"])[0].text_a == "a, b"


def test_generic_errors(tmp_path):
  with pytest.raises(cd.DataError, match=r"d.tsv:1: header .* no column 'label'"):
    cd.read_generic(write(tmp_path, "d.tsv", "text\tgold\na\tb\n"), "text",
                    label="label", labels=["b"])
  with pytest.raises(cd.DataError, match=r"w.tsv:3: 1 column\(s\), the header has 2"):
    cd.read_generic(write(tmp_path, "w.tsv", "text\tlabel\na\tb\nc\n"), "text",
                    label="label", labels=["b"])
  with pytest.raises(cd.DataError, match=r"j.jsonl:2: not valid JSON"):
    cd.read_generic(write(tmp_path, "j.jsonl", '{"text": "a", "label": "b"}\n{oops\n'),
                    "text", label="label", labels=["b"])
  with pytest.raises(cd.DataError, match=r"u.tsv:2: label 'maybe'"):
    cd.read_generic(write(tmp_path, "u.tsv", "text\tlabel\na\tmaybe\n"), "text",
                    label="label", labels=["yes", "no"])
  with pytest.raises(cd.DataError, match="unknown extension"):
    cd.read_generic(write(tmp_path, "d.xml", "<a/>"), "text")
