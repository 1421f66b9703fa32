"""Fuzz of the text data readers (issue 42, acceptance item 2).

Each reader gets seeded truncations, bit flips and overwritten runs of a
small real file (SQuAD dev, SST-2, MRPC and WNUT-17 cut to a few records; a
SWAG CSV written with csv from real sentences): every outcome must be a
load or a one-line library error naming the file, never another exception
and never a hang. 50 cases per format in the default tier, 500 in `-m slow`.
"""

import csv
import io
import json

import pytest

import corruption
from bert.data import classification_data as cd
from bert.data import ner_data
from bert.data.squad_examples import article_titles, read_squad
from conftest import shared_data


def _head(parts, lines) -> bytes:
  with open(shared_data(*parts), "rb") as f:
    return b"".join(f.readline() for _ in range(lines))


def _rows(parts, lines):
  """Header-less rows of a real GLUE TSV (`"` is no quote there)."""
  text = _head(parts, lines + 1).decode("utf-8-sig")
  return [line.split("\t") for line in text.splitlines()[1:]]


def squad_file() -> bytes:
  with open(shared_data("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    data = json.load(f)
  data["data"] = data["data"][:2]
  for article in data["data"]:
    article["paragraphs"] = article["paragraphs"][:1]
    for paragraph in article["paragraphs"]:
      paragraph["qas"] = paragraph["qas"][:2]
      paragraph["context"] = paragraph["context"][:400]
      for qa in paragraph["qas"]:     # answers inside the cut context
        qa["answers"] = [a for a in qa["answers"]
                         if a["answer_start"] + len(a["text"]) <= 400][:1] or [
                             dict(text=paragraph["context"][:5], answer_start=0)]
  return json.dumps(data, indent=1).encode()


def csv_file() -> bytes:
  out = io.StringIO()
  writer = csv.writer(out)
  writer.writerow(["sentence", "label"])
  writer.writerows(_rows(("glue", "SST-2", "train.tsv"), 8))
  return out.getvalue().encode()


def jsonl_file() -> bytes:
  rows = _rows(("glue", "MRPC", "train.tsv"), 4)
  return "".join(json.dumps(dict(a=r[3], b=r[4], label=int(r[0]))) + "\n"
                 for r in rows).encode()


def swag_file() -> bytes:
  texts = [r[3] for r in _rows(("glue", "MRPC", "train.tsv"), 12)]
  out = io.StringIO()
  writer = csv.writer(out)
  writer.writerow(["video-id", "fold-ind", "startphrase", "sent1", "sent2",
                   "gold-source", "ending0", "ending1", "ending2", "ending3",
                   "label"])
  for i in range(2):
    t = texts[6 * i:6 * i + 6]
    writer.writerow([f"v{i}", str(i), t[0], t[0], t[1][:12], "gold", *t[2:],
                     str(i)])
  return out.getvalue().encode()


def _conll(path):
  sentences = ner_data.read_conll(path)
  ner_data.check_tags(sentences, ner_data.label_list(sentences), path)
  ner_data.read_conll(path, has_tags=None)        # how predict reads it


def _squad(path):
  article_titles(path)
  read_squad(path)


# name: (file name, real bytes, reader)
FORMATS = {
    "squad_json": ("dev.json", squad_file, _squad),
    "glue_sst2_tsv": ("train.tsv", lambda: _head(("glue", "SST-2", "train.tsv"),
                                                  9),
                      lambda p: cd.read_glue("sst-2", p)),
    "glue_mrpc_tsv": ("dev.tsv", lambda: _head(("glue", "MRPC", "dev.tsv"), 5),
                      lambda p: cd.read_glue("mrpc", p, "dev")),
    "generic_tsv": ("sst.tsv", lambda: _head(("glue", "SST-2", "dev.tsv"), 9),
                    lambda p: cd.read_generic(p, "sentence", label="label",
                                              labels=["0", "1"])),
    "generic_csv": ("sst.csv", csv_file,
                    lambda p: cd.read_generic(p, "sentence", label="label",
                                              labels=["0", "1"])),
    "generic_jsonl": ("mrpc.jsonl", jsonl_file,
                      lambda p: cd.read_generic(p, "a", "b", "label",
                                                ["0", "1"])),
    "conll_wnut17": ("train.conll",
                     lambda: _head(("ner", "wnut17", "wnut17train.conll"), 40),
                     _conll),
    "swag_csv": ("val.csv", swag_file, lambda p: cd.read_swag(p)),
}


def _run(tmp_path, fmt, first, last):
  name, make, load = FORMATS[fmt]
  data = make()
  path = str(tmp_path / name)
  with open(path, "wb") as f:
    f.write(data)
  assert corruption.check_reader(load, path, "undamaged") == "ok"
  cases = corruption.corrupt_cases(data, corruption.FUZZ_CASES[1], seed=42)
  failures, outcomes = [], {"ok": 0, "error": 0}
  for label, blob in cases[first:last]:
    with open(path, "wb") as f:
      f.write(blob)
    try:
      outcome = corruption.check_reader(load, path, f"{fmt} {label}")
    except AssertionError as e:
      failures.append(str(e))
      continue
    outcomes["ok" if outcome == "ok" else "error"] += 1
  assert not failures, f"{len(failures)} failure(s):\n" + "\n".join(failures)
  assert outcomes["error"], outcomes       # the damage was noticed at all


@pytest.mark.parametrize("fmt", FORMATS)
def test_damaged_text_files_load_or_are_named(tmp_path, fmt):
  _run(tmp_path, fmt, 0, corruption.FUZZ_CASES[0])


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_damaged_text_files_load_or_are_named_slow(tmp_path, fmt):
  _run(tmp_path, fmt, corruption.FUZZ_CASES[0], corruption.FUZZ_CASES[1])


def _generic(path):
  return cd.read_generic(path, "a", label="label", labels=["0", "1"])


# Cases the fuzz and a hostile look found (at 471c388: raw csv.Error,
# RecursionError, ValueError, or a null read as the text "None").
HOSTILE = [
    ("cr.csv", b'a,label\n"x\ny",1\nb\r c,0\n', _generic,
     r"cr.csv:4: not valid CSV \(new-line character seen in unquoted field"),
    ("big.csv", b'a,label\n"' + b"x" * 200_000 + b'",1\n', _generic,
     r"big.csv:2: not valid CSV \(field larger than field limit"),
    ("swag.csv", b"sent1,sent2,ending0,ending1,ending2,ending3,label\n"
     b"a,b,c\rd,e,f,g,0\n", lambda p: cd.read_swag(p),
     r"swag.csv:2: not valid CSV"),
    ("null.jsonl", b'{"a": "x", "label": "1"}\n{"a": null, "label": "0"}\n',
     _generic, r"null.jsonl:2: field 'a' must be a string, got null"),
    ("list.jsonl", b'{"a": "x", "label": ["1"]}\n', _generic,
     r"list.jsonl:1: field 'label' must be a string or a number, got list"),
    ("deep.jsonl", b"[" * 100_000 + b"\n", _generic,
     r"deep.jsonl:1: not valid JSON \(nested too deeply\)"),
    ("deep.json", b"[" * 100_000, read_squad,
     r"deep.json: not valid JSON for SQuAD \(nested too deeply\)"),
    ("digits.jsonl", b'{"a": "x", "label": ' + b"1" * 5000 + b"}\n", _generic,
     r"digits.jsonl:1: not valid JSON \(Exceeds the limit"),
    ("digits.json", b'{"data": ' + b"1" * 5000 + b"}", read_squad,
     r"digits.json: not valid JSON for SQuAD \(Exceeds the limit"),
]


@pytest.mark.parametrize("name,data,load,message", HOSTILE,
                         ids=[h[0] for h in HOSTILE])
def test_hostile_files_are_named_with_their_line(tmp_path, name, data, load,
                                                 message):
  path = tmp_path / name
  path.write_bytes(data)
  with pytest.raises(cd.DataError, match=message):
    load(str(path))


def test_swag_header_after_blank_lines_and_numeric_json_labels(tmp_path):
  swag = tmp_path / "s.csv"
  swag.write_text("\n\nsent1,sent2,ending0,ending1,ending2,ending3,label\n"
                  "a,b,c,d,e,f,2\n")
  assert cd.read_swag(str(swag))[0].label == 2
  jsonl = tmp_path / "n.jsonl"
  jsonl.write_text('{"a": "x", "label": 1}\n')
  assert _generic(str(jsonl))[0].label == "1"
