/*
 * Dictionary calls that take a key's hash, for the policy's C loops
 * (_monitor.c, _step.c).
 *
 * Each vCPU's ref is a tuple, hashed anew at every look-up (a tuple keeps
 * no hash), which was most of these loops' cost: they take each ref's hash
 * from the dict they walk and look up and store with it, and size the
 * dicts they build once. CPython below 3.13 has the calls for it; from
 * 3.13 on these are the public calls, which hash again.
 */
#ifndef VSMTIO_POLICY_DICTS_H
#define VSMTIO_POLICY_DICTS_H

#include <Python.h>

#if PY_VERSION_HEX < 0x030D0000
#define NEXT(d, pos, key, value, hash) _PyDict_Next(d, pos, key, value, hash)
#define GET(d, key, hash) _PyDict_GetItem_KnownHash(d, key, hash)
#define SET(d, key, value, hash) _PyDict_SetItem_KnownHash(d, key, value, hash)
#define NEW_DICT(n) _PyDict_NewPresized(n)
#else
#define NEXT(d, pos, key, value, hash) PyDict_Next(d, pos, key, value)
#define GET(d, key, hash) PyDict_GetItemWithError(d, key)
#define SET(d, key, value, hash) PyDict_SetItem(d, key, value)
#define NEW_DICT(n) PyDict_New()
#endif

#endif
