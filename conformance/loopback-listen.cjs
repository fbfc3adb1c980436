// loopback-listen.cjs: a Node preload (node --require) that keeps every TCP
// listener of the process on loopback.
//
// scripts/conformance.sh puts it in NODE_OPTIONS for every Node process it
// starts (npm, the conformance CLI), so a listen() with no host, or with the
// wildcard '::' or '0.0.0.0', binds 127.0.0.1 instead of every interface.
// Listeners that name a host keep it, and ones on an inherited file
// descriptor or a Unix socket are left alone.
//
// The rewrite happens in Server.prototype._listen2, the hook Node keeps for
// wrappers of listen(); at that point the port is already resolved and the
// call is still synchronous, so server.address() works right after listen(0).
'use strict';

const net = require('node:net');

const wildcard = new Set([undefined, null, '', '::', '0.0.0.0']);
const listen2 = net.Server.prototype._listen2;

net.Server.prototype._listen2 = function loopbackListen2(address, port, addressType, backlog, fd, flags) {
  const onFD = typeof fd === 'number' && fd >= 0;
  if (!onFD && typeof port === 'number' && port >= 0 && wildcard.has(address)) {
    address = '127.0.0.1';
    addressType = 4;
  }
  return listen2.call(this, address, port, addressType, backlog, fd, flags);
};
