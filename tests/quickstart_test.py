"""`bert-quickstart` ends on a result a newcomer can believe: its classifier,
fine-tuned on the bundled pairs, gets most of 24 pairs it never saw right,
every unrelated pair among them, with confidence (a model no better than a
coin flip gets about half, at ~0.5)."""

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO_ROOT


@pytest.mark.slow
def test_quickstart_gets_held_out_pairs_right():
  # The script by path: `bert.scripts` of an editable install may be
  # another checkout's.
  run = subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, "scripts", "quickstart.py")],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=True)
  out = run.stdout
  right = re.search(r"held-out pairs right: (\d+)/(\d+)", out)
  assert right, out
  assert int(right.group(2)) == 24
  assert int(right.group(1)) >= 18, out          # seeds 0-4: 18-23
  assert re.search(r"unrelated: 8/8", out), out
  paraphrases = re.search(r"paraphrases: (\d)/8", out)
  assert int(paraphrases.group(1)) >= 6, out
  # The first two shown (a paraphrase, an unrelated pair), with confidence.
  shown = re.findall(r": (paraphrase|different) \((\d\.\d\d)\)$", out, re.M)
  assert [label for label, _ in shown[:2]] == ["paraphrase", "different"]
  assert all(float(p) >= 0.9 for _, p in shown[:2]), out
