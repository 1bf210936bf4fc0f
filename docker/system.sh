#!/bin/sh
# The Debian packages an image's runtime stage needs, installed lean: no recommends, no
# manuals or translations (a dpkg exclude, kept for later installs too), no apt lists or .deb
# archives left behind. Versions are fixed by the Debian release of the pinned base image.
#
#   sh system.sh PACKAGE...
set -eu
[ "$#" -gt 0 ] || { echo "system.sh: name the packages to install" >&2; exit 2; }
printf '%s\n' \
    'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
    'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' \
    'path-exclude=/usr/share/locale/*' 'path-include=/usr/share/locale/locale.alias' \
    > /etc/dpkg/dpkg.cfg.d/01-atoll-slim
apt-get update
apt-get install -y --no-install-recommends "$@"
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
