// Preload for collecting desktop-commander's tool list: its descriptions
// inline facts about the machine the server runs on, and inside a container
// they list that container's mount points.  This hides the usual container
// markers (/.dockerenv, /proc/1/cgroup, /proc/1/environ) from the server so
// the catalog shows what a plain Linux host gets, not the collecting sandbox.
'use strict';
const fs = require('fs');
const hidden = new Set(['/.dockerenv', '/run/.containerenv', '/var/run/secrets/kubernetes.io']);
const blank = new Set(['/proc/1/cgroup', '/proc/1/environ']);
const existsSync = fs.existsSync;
fs.existsSync = function (p) {
  if (typeof p === 'string' && hidden.has(p)) return false;
  return existsSync.apply(this, arguments);
};
const readFileSync = fs.readFileSync;
fs.readFileSync = function (p) {
  if (typeof p === 'string' && blank.has(p)) return typeof arguments[1] === 'undefined' ? Buffer.alloc(0) : '';
  return readFileSync.apply(this, arguments);
};
