#!/usr/bin/env bash
# Makes a self-signed TLS certificate for trying the compose `tls` profile:
#   deploy/make-self-signed-cert.sh [DIR] [NAME...]
# writes DIR/tls.crt and DIR/tls.key (DIR defaults to deploy/certs, what compose.yaml mounts
# unless TLS_CERT_DIR says otherwise). The certificate is valid for localhost, 127.0.0.1 and every
# NAME given (a DNS name or an IPv4/IPv6 address), e.g. the host name slime's nodes use.
# Clients must be told to trust it (Python: SSL_CERT_FILE or the ssl context; Node:
# NODE_EXTRA_CA_CERTS=DIR/tls.crt). For production, put your CA-issued certificate and key there
# under the same names instead.
set -euo pipefail
DIR="${1:-$(cd "$(dirname "$0")" && pwd)/certs}"
shift || true
DAYS="${CERT_DAYS:-365}"
command -v openssl >/dev/null || { echo "error: openssl is needed (apt-get install -y openssl)" >&2; exit 1; }
mkdir -p "$DIR"
SAN="DNS:localhost,IP:127.0.0.1,IP:::1"
for name in "$@"; do
  if [[ "$name" =~ ^[0-9.]+$ || "$name" == *:* ]]; then SAN="$SAN,IP:$name"; else SAN="$SAN,DNS:$name"; fi
done
CN="${1:-localhost}"
umask 077
openssl req -x509 -newkey rsa:2048 -sha256 -nodes -days "$DAYS" \
  -subj "/CN=$CN" \
  -addext "subjectAltName=$SAN" \
  -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
  -addext "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign" \
  -addext "extendedKeyUsage=serverAuth" \
  -keyout "$DIR/tls.key" -out "$DIR/tls.crt" 2>/dev/null
# nginx's master process (root) reads the key; the certificate is public
chmod 600 "$DIR/tls.key"
chmod 644 "$DIR/tls.crt"
echo "wrote $DIR/tls.crt and $DIR/tls.key (CN=$CN, $SAN, $DAYS days)"
