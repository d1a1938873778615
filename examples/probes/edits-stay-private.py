# A probe may change its copy freely: it deletes the README and adds a file.
# The next probe still sees the original repository, because every call gets
# a fresh snapshot.  Answers EDITED once its own edits are in place.
import json
import os

for name in os.listdir("."):
    if name.lower().startswith("readme"):
        os.remove(name)
with open("scratch.txt", "w") as scratch:
    scratch.write("only this invocation sees me\n")
answer = "EDITED" if os.path.exists("scratch.txt") else "UNCHANGED"
with open("/probe/out", "w") as out:
    json.dump({"result": answer}, out)
