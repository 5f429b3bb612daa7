#!/usr/bin/python3
# Runs a command under a seccomp filter that allows only the given socket address families, the
# way systemd's RestrictAddressFamilies= does where systemd itself is absent: socket() with any
# other family fails with EAFNOSUPPORT (errno 97). Needs python3-seccomp (Debian).
#   restrict-address-families.py "AF_INET AF_INET6 AF_UNIX AF_NETLINK" node main.js
import errno
import os
import socket
import sys

import seccomp

families = {getattr(socket, name) for name in sys.argv[1].split()}
command = sys.argv[2:]
rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
for family in range(0, 64):  # AF_MAX is below 64 on Linux
    if family not in families:
        rules.add_rule(seccomp.ERRNO(errno.EAFNOSUPPORT), "socket", seccomp.Arg(0, seccomp.EQ, family))
rules.load()
os.execvp(command[0], command)
