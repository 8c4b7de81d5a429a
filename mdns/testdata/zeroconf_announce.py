# Announces one DNS-SD service with python-zeroconf on loopback only, as the
# Python SiLA 2 library and the Python MHP reference do, until stdin closes
# (at most 120 s). Used through mdnstest.Zeroconf by the tests that set
# MHP_PEER_ZEROCONF=<a python3 with zeroconf>.
#
# usage: zeroconf_announce.py TYPE INSTANCE PORT SERVER [KEY=VALUE ...]
#   e.g. zeroconf_announce.py _mhp._tcp tc-9 18900 mhp-box.local id=tc-9 class=thermocycler path=/mhp.json
import socket
import sys
import threading

from zeroconf import IPVersion, ServiceInfo, Zeroconf

kind, instance, port, server = sys.argv[1:5]
props = dict(kv.split("=", 1) for kv in sys.argv[5:])
zc = Zeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)
info = ServiceInfo(
    f"{kind}.local.",
    f"{instance}.{kind}.local.",
    addresses=[socket.inet_aton("127.0.0.1")],
    port=int(port),
    server=f"{server}.",
    properties=props,
)
zc.register_service(info)
print("registered", flush=True)
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
done.wait(120)
zc.unregister_service(info)
zc.close()
