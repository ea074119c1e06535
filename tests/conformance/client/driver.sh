#!/usr/bin/env bash
# The conformance suite's client driver for mcpd's OAuth login (the suite's auth/* client
# scenarios). The suite runs it as
#
#   conformance client --command tests/conformance/client/driver.sh --scenario auth/NAME
#
# and appends the mock MCP server's URL as the last argument. The driver plays the user of
# a desktop: it configures that URL as mcpd's one remote server `test`, starts the daemon,
# waits for `mcpd ctl status` to show `needs-login`, runs `mcpd ctl login test --no-browser`,
# and, instead of a browser, GETs the printed authorization URL without following the
# redirect and GETs the redirect's Location (mcpd's own loopback callback). Then it speaks
# to mcpd as an agent (initialize, tools/list until `test__test-tool` is listed,
# tools/call). When mcpd answers a call with an error naming `mcpd ctl login` (step-up,
# a changed authorization server), it logs in again and retries: at most 3 logins in all.
#
# The machine-grant extension scenarios have no login and no browser: the config names the
# grant and its credential (below), and the driver goes straight to the agent's call (mcpd
# gets its token by itself on the server's first 401); a request for `mcpd ctl login`
# fails the run.
#   auth/client-credentials-basic          grant = "client_credentials", client_id, client_secret
#   auth/client-credentials-jwt            grant = "client_credentials", client_id,
#                                          client_auth = "private_key_jwt", private_key_file
#   auth/wif-jwt-bearer                    grant = "jwt_bearer", client_id, assertion_file
#   auth/enterprise-managed-authorization  grant = "jwt_bearer", client_id, client_secret, and
#                                          [servers.test.oauth.identity_provider] issuer,
#                                          client_id, token_endpoint, id_token_file
# Secrets and key/token material are files in the run's credentials dir, created 0600 by
# helper.py (client_secret as `${secret:conformance-client}`, i.e. $CREDENTIALS_DIRECTORY);
# they are never on a command line and never copied to MCPD_AUTH_DRIVER_LOGS. auth/dpop and
# auth/dpop-nonce use the ordinary login (mcpd turns DPoP on where the server advertises it).
#
# Environment (set by the suite):
#   MCP_CONFORMANCE_SCENARIO          the scenario, e.g. auth/metadata-default
#   MCP_CONFORMANCE_PROTOCOL_VERSION  2026-07-28 (or later): protocol = "modern"; else "legacy"
#   MCP_CONFORMANCE_CONTEXT           JSON; its client_id/client_secret (auth/pre-registration)
#                                     become a pre-registered client; the machine grants'
#                                     client, key, assertion and IdP (see helper.py context)
# and (optional, set by tests/conformance/auth.sh or by hand):
#   MCPD_BIN                     the mcpd binary (default: target/debug/mcpd)
#   MCPD_AUTH_DRIVER_DEADLINE    seconds for the whole run (default 25; the suite kills its
#                                client after 30 s, and the driver must clean up before that)
#   MCPD_AUTH_DRIVER_LOGS        a directory: mcpd's log and the driver's files of this run
#                                are copied there as <scenario>.* before the temp dir goes
#   MCPD_AUTH_DRIVER_LOG_LEVEL   mcpd's --log-level (default info,mcpd=debug)
#   MCPD_DRIVER_PYTHON           the Python 3 that runs helper.py (default python3)
#
# Exit status: 0 when the tool call succeeded; 1 otherwise, with the cause (and the end of
# mcpd's log) on stderr; 2 for a usage error. Each run has its own temp dir (the suite runs
# scenarios in parallel); the daemon is stopped and the dir removed on every exit.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo="$(cd -- "$here/../../.." && pwd -P)"
mcpd="${MCPD_BIN:-$repo/target/debug/mcpd}"
python="${MCPD_DRIVER_PYTHON:-python3}"
helper="$here/helper.py"
budget="${MCPD_AUTH_DRIVER_DEADLINE:-25}"
log_level="${MCPD_AUTH_DRIVER_LOG_LEVEL:-info,mcpd=debug}"

server="test"                 # the one server in the config
tool="${server}__test-tool"   # the mock's `test-tool` as mcpd presents it to agents
max_logins=3                  # logins in all, the first one included
cimd_url="https://conformance-test.local/client-metadata.json"

say() { echo "mcpd-auth-driver: $*" >&2; }
usage() {
  echo "usage: ${BASH_SOURCE[0]} [ARGS...] SERVER_URL   (run by: conformance client --command ${BASH_SOURCE[0]} --scenario auth/NAME)" >&2
  exit 2
}

work="" mcpd_pid="" login_pid="" failing=0
fail() {
  say "FAILED: $*"
  failing=1
  if [[ -n "$work" && -s "$work/mcpd.log" ]]; then
    say "the end of mcpd's log (less the driver's own status and tools/list polling):"
    grep -v -E ' agent (connected|disconnected)|DEBUG request agent=[0-9]+ rpc_id=[0-9]+ method=(mcpd/status|tools/list)$' \
      "$work/mcpd.log" | tail -n 40 | sed 's/^/  mcpd| /' >&2 || true
  fi
  exit 1
}

stop_pid() { # PID SECONDS: SIGTERM, wait up to SECONDS, then SIGKILL; always reaped
  local pid="$1" grace="$2" i
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 20; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "pid $pid did not stop within ${grace}s of SIGTERM; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [[ -n "$login_pid" ]] && stop_pid "$login_pid" 2
  [[ -n "$mcpd_pid" ]] && stop_pid "$mcpd_pid" 8
  if [[ -n "$work" && -d "$work" ]]; then
    if [[ -n "${MCPD_AUTH_DRIVER_LOGS:-}" ]]; then
      local name="${MCP_CONFORMANCE_SCENARIO:-unknown}" f
      name="${name//\//_}"
      if mkdir -p "$MCPD_AUTH_DRIVER_LOGS"; then
        for f in "$work"/*; do
          [[ -f "$f" ]] && cp -- "$f" "$MCPD_AUTH_DRIVER_LOGS/$name.$(basename -- "$f")" 2>/dev/null || true
        done
      fi
    fi
    rm -rf -- "$work"
  fi
  ((rc == 0 || failing)) || say "exiting with status $rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

remaining() { echo $((deadline - SECONDS)); }
# The smaller of N seconds and what is left of the run's budget (at least 1).
within() { local n="$1" r=$((deadline - SECONDS)); ((r < n)) && n=$r; ((n < 1)) && n=1; echo "$n"; }

# A TOML basic string; its value has been checked by plain_value (no control characters).
toml_str() {
  local s="$1"
  s="${s//\\/\\\\}"
  s="${s//\"/\\\"}"
  printf '"%s"' "$s"
}

# ---------------------------------------------------------------- inputs

[[ $# -ge 1 ]] || usage
url="${!#}"
[[ "$url" =~ ^https?://[^[:space:]]+$ ]] || { say "the last argument must be the server URL, got ${url@Q}"; usage; }
[[ "$budget" =~ ^[0-9]+$ && "$budget" -ge 5 ]] || { say "MCPD_AUTH_DRIVER_DEADLINE must be a whole number of seconds >= 5"; exit 2; }
deadline=$((SECONDS + budget))
scenario="${MCP_CONFORMANCE_SCENARIO:-}"
version="${MCP_CONFORMANCE_PROTOCOL_VERSION:-2025-11-25}"
[[ "$version" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || fail "MCP_CONFORMANCE_PROTOCOL_VERSION is not a date: ${version@Q}"
protocol=legacy
[[ ! "$version" < "2026-07-28" ]] && protocol=modern

[[ -x "$mcpd" ]] || fail "no mcpd binary at $mcpd (set MCPD_BIN)"
command -v "$python" >/dev/null 2>&1 || fail "no $python on PATH (set MCPD_DRIVER_PYTHON)"

# How mcpd gets its token: by the authorization-code flow through `mcpd ctl login` (every
# scored scenario, and auth/dpop*, where DPoP is mcpd's default because the authorization
# server advertises ES256 for it), or by a machine grant with no login at all.
case "$scenario" in
  auth/client-credentials-basic | auth/client-credentials-jwt) grant=client_credentials ;;
  auth/wif-jwt-bearer | auth/enterprise-managed-authorization) grant=jwt_bearer ;;
  *) grant=authorization_code ;;
esac

plain_value() { # WHAT VALUE: refuse control characters rather than escape them
  [[ ! "$2" =~ [[:cntrl:]] ]] || fail "refusing to write a control character into the config ($1): ${2@Q}"
}
plain_value "server URL" "$url"

# ---------------------------------------------------------------- config and daemon

work="$(mktemp -d "${TMPDIR:-/tmp}/mcpd-auth.XXXXXX")"
if ((${#work} > 80)); then # a Unix socket path has at most ~108 bytes
  rm -rf -- "$work"
  work="$(mktemp -d /tmp/mcpd-auth.XXXXXX)"
fi
sock="$work/mcpd.sock"
cfg="$work/mcpd.toml"
# The scenario's secrets, as a user keeps them: systemd credentials, looked up by name
# (`${secret:NAME}` is $CREDENTIALS_DIRECTORY/NAME), and the key and token files beside them.
# All 0600; this dir is never copied to MCPD_AUTH_DRIVER_LOGS.
creds="$work/credentials"
mkdir -m 700 "$creds"

# The context's values (auth/pre-registration's client; each machine grant's client, key,
# assertion, IdP): helper.py writes the secret ones into $creds and prints the others.
declare -A ctx=()
if [[ -n "${MCP_CONFORMANCE_CONTEXT:-}" || "$grant" != authorization_code ]]; then
  ctx_lines="$("$python" "$helper" context --scenario "$scenario" --dir "$creds")" \
    || fail "MCP_CONFORMANCE_CONTEXT does not carry what $scenario needs (above)"
  while IFS='=' read -r key value; do
    [[ -n "$key" ]] || continue
    plain_value "$key" "$value"
    ctx[$key]="$value"
  done <<<"$ctx_lines"
fi
client_id="${ctx[client_id]:-}"
# The client secret is a credential of that dir, named in the config, never its value.
# shellcheck disable=SC2016 # mcpd expands it, not the shell
secret_line='client_secret = "${secret:conformance-client}"'

{
  echo "# written by tests/conformance/client/driver.sh for ${scenario:-a manual run} ($version)"
  echo "[daemon]"
  echo "socket = $(toml_str "$sock")"
  echo "state_dir = $(toml_str "$work/state")"
  echo 'shutdown_grace = "1s"'
  # Unpinned: a scenario's server may change its lists, and pinning (tests/it/pins/held.rs)
  # would hold the change for a person.
  echo 'pin = "off"'
  echo
  echo "[servers.$server]"
  echo "url = $(toml_str "$url")"
  echo "protocol = \"$protocol\""
  echo
  echo "[servers.$server.oauth]"
  case "$scenario" in
    auth/client-credentials-basic)
      echo 'grant = "client_credentials"'
      echo "client_id = $(toml_str "$client_id")"
      echo "$secret_line"
      ;;
    auth/client-credentials-jwt)
      echo 'grant = "client_credentials"'
      echo "client_id = $(toml_str "$client_id")"
      echo 'client_auth = "private_key_jwt"'
      echo "private_key_file = $(toml_str "$creds/${ctx[private_key_pem_file]}")"
      ;;
    auth/wif-jwt-bearer)
      echo 'grant = "jwt_bearer"'
      echo "client_id = $(toml_str "$client_id")"
      echo "assertion_file = $(toml_str "$creds/${ctx[valid_jwt_file]}")"
      ;;
    auth/enterprise-managed-authorization)
      echo 'grant = "jwt_bearer"'
      echo "client_id = $(toml_str "$client_id")"
      echo "$secret_line"
      echo
      echo "[servers.$server.oauth.identity_provider]"
      echo "issuer = $(toml_str "${ctx[idp_issuer]}")"
      echo "client_id = $(toml_str "${ctx[idp_client_id]}")"
      echo "token_endpoint = $(toml_str "${ctx[idp_token_endpoint]}")"
      echo "id_token_file = $(toml_str "$creds/${ctx[idp_id_token_file]}")"
      ;;
    *)
      echo "client_metadata_url = $(toml_str "$cimd_url")"
      if [[ -n "$client_id" ]]; then
        echo "client_id = $(toml_str "$client_id")"
        if [[ -n "${ctx[client_secret_file]:-}" ]]; then echo "$secret_line"; fi
      fi
      ;;
  esac
} >"$cfg"

if [[ "$grant" == authorization_code ]]; then
  say "scenario ${scenario:-?} at $version: server $url, protocol $protocol${client_id:+, pre-registered client $client_id}"
else
  say "scenario $scenario at $version: server $url, protocol $protocol, grant $grant, client $client_id"
fi
CREDENTIALS_DIRECTORY="$creds" \
  "$mcpd" serve --config "$cfg" --socket "$sock" --log-level "$log_level" </dev/null >"$work/mcpd.log" 2>&1 &
mcpd_pid=$!

ready_by=$((SECONDS + $(within 10)))
until "$mcpd" ctl --socket "$sock" status >/dev/null 2>&1; do
  kill -0 "$mcpd_pid" 2>/dev/null || { wait "$mcpd_pid" && rc=0 || rc=$?; mcpd_pid=""; fail "mcpd serve exited with status $rc before its socket answered"; }
  ((SECONDS < ready_by)) || fail "mcpd's socket $sock did not answer within 10 s"
  sleep 0.05
done
say "mcpd is up (pid $mcpd_pid)"

# The user's cue: `ctl status` shows that the server needs a login. A machine grant has
# none: mcpd gets its token by itself on the server's first 401.
if [[ "$grant" == authorization_code ]]; then
  state="$("$python" "$helper" wait-state --mcpd "$mcpd" --socket "$sock" --server "$server" \
    --want needs-login --deadline "$(within 10)")" || fail "the server never showed needs-login in \`mcpd ctl status\`"
  say "ctl status: $state"
fi

# ---------------------------------------------------------------- login

logins=0
login() {
  logins=$((logins + 1))
  local n=$logins out="$work/login$logins.stdout" err="$work/login$logins.stderr"
  local auth_url="" location answer rc by
  say "login $n: mcpd ctl login $server --no-browser"
  "$mcpd" ctl --socket "$sock" login "$server" --no-browser </dev/null >"$out" 2>"$err" &
  login_pid=$!

  # The authorization URL is the first stdout line starting with http:// or https://.
  by=$((SECONDS + $(within 15)))
  while [[ -z "$auth_url" ]]; do
    auth_url="$(grep -m1 -E '^https?://' "$out" || true)"
    [[ -n "$auth_url" ]] && break
    if ! kill -0 "$login_pid" 2>/dev/null; then
      rc=0
      wait "$login_pid" || rc=$?
      login_pid=""
      fail "login $n: ctl login exited with status $rc without printing an authorization URL: $(tr '\n' ' ' <"$err")"
    fi
    ((SECONDS < by)) || fail "login $n: ctl login printed no authorization URL within 15 s (stderr: $(tr '\n' ' ' <"$err"))"
    sleep 0.05
  done
  say "login $n: authorization URL: $auth_url"

  # The browser's part: the authorization server answers at once with a redirect.
  location="$("$python" "$helper" redirect "$auth_url")" || fail "login $n: the authorization URL did not redirect"
  say "login $n: redirected to $location"
  [[ "$location" =~ ^http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]+)?/ ]] \
    || fail "login $n: the redirect goes to $location, not to mcpd's loopback callback"
  rc=0
  answer="$("$python" "$helper" get "$location")" || rc=$?
  say "login $n: mcpd's callback answered ${answer:-nothing}"

  # ctl login reports how the login ended.
  by=$((SECONDS + $(within 15)))
  while kill -0 "$login_pid" 2>/dev/null; do
    ((SECONDS < by)) || fail "login $n: ctl login did not finish within 15 s of the redirect"
    sleep 0.05
  done
  rc=0
  wait "$login_pid" || rc=$?
  login_pid=""
  if ((rc != 0)); then
    fail "login $n: ctl login exited with status $rc: $(tr '\n' ' ' <"$err")"
  fi
  say "login $n: ctl login succeeded"
}

# ---------------------------------------------------------------- the agent's call

[[ "$grant" == authorization_code ]] && login
while :; do
  rc=0
  result="$("$python" "$helper" call --mcpd "$mcpd" --socket "$sock" --server "$server" \
    --tool "$tool" --deadline "$(within "$budget")")" || rc=$?
  case "$rc" in
    0)
      say "tools/call $tool succeeded after $logins login(s): $result"
      echo "$result"
      exit 0
      ;;
    3)
      [[ "$grant" == authorization_code ]] \
        || fail "mcpd asks for \`mcpd ctl login\`, which grant $grant never needs"
      ((logins < max_logins)) || fail "mcpd still asks for a login after $logins logins (the driver stops there)"
      login
      ;;
    *)
      fail "tools/call $tool did not succeed (after $logins login(s))"
      ;;
  esac
done
