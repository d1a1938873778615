# Does any Python file at the top level define a main() function?  Reads the
# repository; answers MAIN, NO-MAIN, or NO-PYTHON when there is nothing to read.
import ast
import json
import os

files = [name for name in os.listdir(".") if name.endswith(".py")]
if not files:
    answer = "NO-PYTHON"
else:
    answer = "NO-MAIN"
    for name in files:
        with open(name, encoding="utf-8") as source:
            tree = ast.parse(source.read(), filename=name)
        if any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in ast.walk(tree)):
            answer = "MAIN"
            break
with open("/probe/out", "w") as out:
    json.dump({"result": answer}, out)
