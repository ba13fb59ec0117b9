#!/bin/sh
echo "coverage is not collected in zeropp" >&2
exit 1
