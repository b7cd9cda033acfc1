#!/usr/bin/env bash
# Makes the certificates of deploy/kubernetes/cluster's mutual TLS, with
# openssl alone, into DIR:
#
#   nodes-ca.crt, nodes-ca.key       the CA of the nodes (--tls_peer_ca)
#   clients-ca.crt, clients-ca.key   the CA of the clients (--tls_client_ca)
#   hourglass-<n>.crt, .key          node hourglass-<n>'s certificate, signed
#                                    by nodes-ca, for serverAuth and
#                                    clientAuth (a node is a server to its
#                                    clients and a client of its peers)
#   hourglass-client.crt, .key       a client certificate, signed by
#                                    clients-ca, for clientAuth only
#
# then prints the kubectl commands that load them into the Secrets the
# StatefulSet and your clients mount. Two CAs, not one: hourglassd lets
# every caller whose certificate --tls_peer_ca signs use the Replication
# service (a shard's whole log, with no token), so a client certificate
# must never come from the nodes' CA.
#
# A node certificate names what a node is dialled at: its stable name
# hourglass-<n>.hourglass-headless.<namespace>.svc, which it advertises
# (peers verify it there, and clients redirected to the primary dial it),
# the shorter forms of that name, the headless Service, and the client
# Service `hourglass` that clients and the probes dial (the probes as
# HOURGLASS_TLS_SERVER_NAME=hourglass, since they dial 127.0.0.1).
#
# Usage: deploy/make-cluster-certs.sh [options] DIR
#   --namespace=NS     namespace of the StatefulSet (default: default)
#   --nodes=N          node certificates hourglass-0 .. hourglass-<N-1>
#                      (default: 3, the StatefulSet's replicas)
#   --client=NAME      common name of the client certificate, as a `cert`
#                      line of the token file names it (default:
#                      hourglass-client)
#   --domain=DOMAIN    the Kubernetes cluster's DNS domain (default:
#                      cluster.local)
#   --days=N           validity of the node and client certificates
#                      (default: 365; the CAs get ten years)
#   --add              reuse the CAs already in DIR and make only the
#                      certificates DIR lacks: for new nodes before
#                      `kubectl scale`, or another --client
#
# It never overwrites a file: without --add, DIR must hold none of the
# files above; with --add, it must hold both CAs. Private keys are EC P-256,
# mode 0600, in a DIR of mode 0700. Keep the CA keys out of the cluster:
# only their certificates go into Secrets.
set -euo pipefail

usage() {  # [STATUS]: 0 for --help, on standard output; 2 for a mistake
  local status=${1:-2} text
  text=$(sed -n '/^# Usage:/,/^# It never/p' "$0" | sed '$d; s/^# \{0,1\}//')
  if ((status == 0)); then echo "$text"; else echo "$text" >&2; fi
  exit "$status"
}

namespace=default
nodes=3
client=hourglass-client
domain=cluster.local
days=365
add=0
dir=
for arg in "$@"; do
  case $arg in
    --namespace=*) namespace=${arg#*=} ;;
    --nodes=*) nodes=${arg#*=} ;;
    --client=*) client=${arg#*=} ;;
    --domain=*) domain=${arg#*=} ;;
    --days=*) days=${arg#*=} ;;
    --add) add=1 ;;
    -h | --help) usage 0 ;;
    -*) echo "make-cluster-certs.sh: unknown option $arg" >&2; usage ;;
    *) [[ -z $dir ]] || usage; dir=$arg ;;
  esac
done
[[ -n $dir ]] || usage
[[ $nodes =~ ^[1-9][0-9]*$ ]] || { echo "make-cluster-certs.sh: --nodes must be a positive number, not '$nodes'" >&2; exit 2; }
[[ $days =~ ^[1-9][0-9]*$ ]] || { echo "make-cluster-certs.sh: --days must be a positive number, not '$days'" >&2; exit 2; }
# DNS labels, as Kubernetes names its namespaces; the client name is what a
# `cert` line names: printable, no space, '#' or ','.
[[ $namespace =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || { echo "make-cluster-certs.sh: '$namespace' is not a namespace name" >&2; exit 2; }
[[ $domain =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || { echo "make-cluster-certs.sh: '$domain' is not a DNS domain" >&2; exit 2; }
[[ $client =~ ^[A-Za-z0-9._:/@-]+$ ]] || { echo "make-cluster-certs.sh: '$client' cannot be named by a cert line" >&2; exit 2; }
command -v openssl >/dev/null || { echo "make-cluster-certs.sh: needs openssl" >&2; exit 1; }

# The names of deploy/kubernetes/cluster: the StatefulSet, its headless
# Service, the client Service.
statefulset=hourglass
headless=hourglass-headless
service=hourglass

# --- What to make, and the refusal to overwrite ---------------------------
cas=(nodes-ca clients-ca)
leaves=()
for ((n = 0; n < nodes; n++)); do leaves+=("$statefulset-$n"); done
if [[ $client =~ ^$statefulset-[0-9]+$ ]]; then
  echo "make-cluster-certs.sh: --client=$client is a node's name" >&2
  exit 2
fi
leaves+=("$client")

existing=()
make=()
if ((add)); then
  for ca in "${cas[@]}"; do
    for ext in crt key; do
      [[ -f $dir/$ca.$ext ]] || { echo "make-cluster-certs.sh: --add needs $dir/$ca.$ext (the CAs of an earlier run)" >&2; exit 1; }
    done
  done
  for name in "${leaves[@]}"; do
    if [[ -e $dir/$name.crt || -e $dir/$name.key ]]; then
      # Half a pair is a mistake to look at, not to mend.
      [[ -e $dir/$name.crt && -e $dir/$name.key ]] || { echo "make-cluster-certs.sh: $dir holds only one of $name.crt and $name.key; refusing to overwrite it" >&2; exit 1; }
    else
      make+=("$name")
    fi
  done
else
  for name in "${cas[@]}" "${leaves[@]}"; do
    for ext in crt key; do
      [[ ! -e $dir/$name.$ext ]] || existing+=("$dir/$name.$ext")
    done
  done
  if ((${#existing[@]})); then
    echo "make-cluster-certs.sh: refusing to overwrite ${existing[*]}" >&2
    echo "  (a new set goes into another directory; --add makes only what is missing)" >&2
    exit 1
  fi
  make=("${leaves[@]}")
fi

if [[ ! -d $dir ]]; then
  mkdir -p -- "$(dirname -- "$dir")"
  mkdir -m 0700 -- "$dir"
fi
# Everything is made in a directory of its own inside DIR, then moved into
# DIR at the end: a run that fails leaves DIR as it was.
work=$(mktemp -d "$dir/.make-cluster-certs.XXXXXX")
trap 'rm -rf "$work"' EXIT
umask 077

ssl() {  # openssl ARGS..., quiet unless it fails
  local out
  if ! out=$(openssl "$@" 2>&1); then
    echo "make-cluster-certs.sh: openssl $1 failed: $out" >&2
    exit 1
  fi
}

new_key() {  # PATH
  ssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"
  chmod 0600 "$1"
}

serial() {  # A random serial number, as RFC 5280 wants.
  echo "0x$(openssl rand -hex 16)"
}

new_ca() {  # NAME COMMON_NAME
  new_key "$work/$1.key"
  ssl req -new -x509 -key "$work/$1.key" -out "$work/$1.crt" \
    -days 3650 -set_serial "$(serial)" -subj "/O=hourglass/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash"
  chmod 0644 "$work/$1.crt"
}

new_leaf() {  # NAME CA EXTENDED_KEY_USAGE [SUBJECT_ALT_NAME]
  local name=$1 ca=$2 usage=$3 san=${4:-}
  new_key "$work/$name.key"
  ssl req -new -key "$work/$name.key" -subj "/O=hourglass/CN=$name" \
    -out "$work/$name.csr"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=$usage"
    echo "subjectKeyIdentifier=hash"
    echo "authorityKeyIdentifier=keyid"
    [[ -z $san ]] || echo "subjectAltName=$san"
  } > "$work/$name.ext"
  # The CA made by this run, or (--add) the one in DIR.
  local ca_dir=$dir
  if [[ -f $work/$ca.key ]]; then ca_dir=$work; fi
  ssl x509 -req -in "$work/$name.csr" -CA "$ca_dir/$ca.crt" \
    -CAkey "$ca_dir/$ca.key" -set_serial "$(serial)" -days "$days" \
    -extfile "$work/$name.ext" -out "$work/$name.crt"
  chmod 0644 "$work/$name.crt"
  rm "$work/$name.csr" "$work/$name.ext"
}

if ((!add)); then
  new_ca nodes-ca "hourglass nodes CA"
  new_ca clients-ca "hourglass clients CA"
fi
for name in "${make[@]}"; do
  if [[ $name == "$client" ]]; then
    new_leaf "$name" clients-ca clientAuth
  else
    # The pod's stable name in every form a resolver completes, the
    # headless Service, and the client Service.
    sans=()
    for host in "$name.$headless" "$headless" "$service"; do
      sans+=("DNS:$host" "DNS:$host.$namespace" "DNS:$host.$namespace.svc"
             "DNS:$host.$namespace.svc.$domain")
    done
    new_leaf "$name" nodes-ca serverAuth,clientAuth "$(IFS=,; echo "${sans[*]}")"
  fi
done

shopt -s nullglob
made=()
for file in "$work"/*; do
  [[ ! -e $dir/${file##*/} ]] || { echo "make-cluster-certs.sh: $dir/${file##*/} appeared meanwhile; refusing to overwrite it" >&2; exit 1; }
done
for file in "$work"/*; do
  mv "$file" "$dir/"
  made+=("${file##*/}")
done

if ((${#made[@]})); then
  echo "Made in $dir: ${made[*]}"
else
  echo "$dir lacked nothing: made no certificate."
fi

# --- How to load them ---------------------------------------------------------
# The Secret the StatefulSet mounts: both CA certificates and every node's
# pair (each pod picks its own by its name). The client's Secret, for the
# pods of your producers and consumers: its pair, and nodes-ca.crt to
# verify the nodes' certificates with.
q() { printf '%q' "$1"; }
node_files=()
for ((n = 0; n < nodes; n++)); do
  node_files+=("$statefulset-$n.crt" "$statefulset-$n.key")
done
secret() {  # NAME FROM_FILE...
  local name=$1
  shift
  printf 'kubectl -n %s create secret generic %s' "$namespace" "$name"
  for from in "$@"; do printf ' \\\n    --from-file=%s' "$from"; done
  # With --add the Secret exists: the same command, applied over it.
  if ((add)); then printf ' \\\n    --dry-run=client -o yaml | kubectl apply -f -'; fi
  printf '\n'
}
echo
echo "Load them into namespace $namespace:"
echo
node_args=("$(q "$dir/nodes-ca.crt")" "$(q "$dir/clients-ca.crt")")
for file in "${node_files[@]}"; do node_args+=("$(q "$dir/$file")"); done
secret hourglass-tls "${node_args[@]}"
secret hourglass-client-tls "tls.crt=$(q "$dir/$client.crt")" \
  "tls.key=$(q "$dir/$client.key")" "ca.crt=$(q "$dir/nodes-ca.crt")"
echo
echo "The client's token file line (the Secret hourglass-auth): cert $client <roles> [<topics>]."
echo "Keep nodes-ca.key and clients-ca.key off the cluster; --add signs new nodes' certificates with them."
