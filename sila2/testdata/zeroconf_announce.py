# Announces one SiLA 2 server with python-zeroconf on loopback only, as the
# Python SiLA 2 library does, until stdin closes (at most 120 s). Used by
# TestBrowseRealZeroconf (MHP_PEER_ZEROCONF=<a python3 with zeroconf>).
import socket
import sys
import threading

from zeroconf import IPVersion, ServiceInfo, Zeroconf

uuid = sys.argv[1]
zc = Zeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)
info = ServiceInfo(
    "_sila._tcp.local.",
    f"{uuid}._sila._tcp.local.",
    addresses=[socket.inet_aton("127.0.0.1")],
    port=50052,
    server="sila-server.local.",
    properties={"version": "1.1", "server_name": "Zeroconf peer", "description": "python-zeroconf"},
)
zc.register_service(info)
print("registered", flush=True)
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
done.wait(120)
zc.unregister_service(info)
zc.close()
