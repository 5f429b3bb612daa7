# Part of scripts/paho/run.sh (the suite itself is fetched, never committed): gives the Paho
# interoperability clients the daemon's port and the user paho's credentials.
import os, importlib
user = os.environ.get("PAHO_USERNAME")
pw = os.environ.get("PAHO_PASSWORD")
def patch(modname):
    try:
        m = importlib.import_module(modname)
    except Exception:
        return
    orig = m.Client.connect
    def connect(self, *a, **kw):
        if os.environ.get("PAHO_PORT"):
            kw["port"] = int(os.environ["PAHO_PORT"])
        if user and kw.get("username") is None:
            kw["username"] = user
            kw["password"] = pw.encode() if pw else None
        return orig(self, *a, **kw)
    m.Client.connect = connect
patch("mqtt.clients.V311.main")
patch("mqtt.clients.V5.main")
