"""An agent for the software-engineering round trip: it reads its task (the repository and
the issue), asks the policy once through its session, then works with its own tools in its
sandbox folder: it writes the repository out, applies its candidate patch with `patch -p1`,
runs the repository's own check with Python, and answers with the patch (a unified diff).
Which patch it tries is its argument: `right` fixes the bug, `wrong` does not; `crash`
gives up after its first request (exit status 1)."""

import json
import subprocess
import sys
from pathlib import Path

from openai import OpenAI

PATCHES = {
    "right": """--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
""",
    "wrong": """--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a * b
""",
}

task = json.load(sys.stdin)
if sys.argv[1] == "crash":  # an agent that breaks after its first request
    OpenAI(max_retries=0).chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "x"}], max_tokens=2
    )
    raise SystemExit("the agent gave up")
client = OpenAI(max_retries=0)
messages = task.get("messages") or [{"role": "user", "content": task["prompt"]}]
client.chat.completions.create(model="policy", messages=messages, max_tokens=4)
for path, text in task["extra_info"]["files"].items():
    Path(path).write_text(text)
patch = PATCHES[sys.argv[1]]
subprocess.run(["patch", "-p1"], input=patch, text=True, check=True, capture_output=True)
check = subprocess.run(
    [sys.executable, "-c", "import calc; print(calc.add(2, 3))"], capture_output=True, text=True
)
print(f"the tools say add(2, 3) = {check.stdout.strip()}", file=sys.stderr)
print(json.dumps({"answer": "```diff\n" + patch + "```"}))
