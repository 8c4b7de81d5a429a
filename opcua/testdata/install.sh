#!/bin/sh
# Installs the real OPC UA peer of the integration tests (node-opcua) into
# opcua/testdata/node_modules. Run by .ci/run before
# `MHP_PEER_OPCUA=1 go test ./opcua/...`.
set -eu
cd "$(dirname "$0")"
if [ -f node_modules/node-opcua/package.json ] && grep -q '"version": "2.186.4"' node_modules/node-opcua/package.json; then
	echo "node-opcua 2.186.4 already installed"
	exit 0
fi
[ -f package.json ] || echo '{"name":"mhp-opcua-testdata","private":true,"type":"module"}' > package.json
npm install --no-audit --no-fund --no-save node-opcua@2.186.4
