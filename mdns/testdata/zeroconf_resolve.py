# Resolves one DNS-SD service instance with python-zeroconf, as a Python
# client of an MHP or SiLA 2 server does (ServiceInfo.request: SRV, TXT,
# A and AAAA questions, the first QU, then QM), listening on loopback only,
# and prints what it resolved as one JSON line: {"server", "port",
# "addresses", "properties"}, or {"error"} when nothing answered in time.
# Used through mdnstest.ZeroconfResolve by the tests that set
# MHP_PEER_ZEROCONF=<a python3 with zeroconf>.
#
# usage: zeroconf_resolve.py TYPE INSTANCE TIMEOUT_MS
#   e.g. zeroconf_resolve.py _mhp._tcp tc-9 5000
import json
import sys

from zeroconf import IPVersion, Zeroconf

kind, instance, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3])
zc = Zeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)
try:
    info = zc.get_service_info(f"{kind}.local.", f"{instance}.{kind}.local.", timeout=timeout)
    if info is None or not info.parsed_addresses():
        print(json.dumps({"error": f"no answer with an address in {timeout} ms" + (f" (server {info.server})" if info else "")}), flush=True)
    else:
        props = {k.decode(errors="replace"): (v or b"").decode(errors="replace") for k, v in info.properties.items()}
        print(json.dumps({"server": info.server, "port": info.port, "addresses": info.parsed_addresses(), "properties": props}), flush=True)
finally:
    zc.close()
