#!/usr/bin/env bash
# Regenerate benches/discovery/catalog/*.json from the pinned MCP servers.
#
# Installs every server at its exact pinned version into a scratch directory
# (never into the repository), then runs collect.py, which speaks MCP over
# stdio to each one and writes the tools/list result.
#
#   benches/discovery/collect.sh            # all servers
#   benches/discovery/collect.sh git time   # only these
#
# Needs: node + npm (Node 20 was used), python3.11, and for the `redis` server
# a local `redis-server` binary (Debian package redis-server); redis is
# skipped with a warning when it is missing.  Only the npm and PyPI
# registries are contacted.  Dummy credentials are used throughout: no
# server is ever asked to do anything but list its tools, and every URL a
# server is given points at a closed port on 127.0.0.1.
#
# Environment: DISC_SCRATCH (default /tmp/mcpd-discovery) is the scratch dir;
# DISC_OUT (default: catalog/ beside this script) is where JSON goes.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
S="${DISC_SCRATCH:-/tmp/mcpd-discovery}"
OUT="${DISC_OUT:-$HERE/catalog}"
PY="${PYTHON:-python3.11}"
mkdir -p "$S"/{npm,home,ws,logs}

# name | registry:package@version (exact; the npm lock files under locks/npm
# and the pip freezes under locks/pypi pin the transitive dependencies too)
SERVERS=(
  "everything|npm:@modelcontextprotocol/server-everything@2026.8.31"
  "filesystem|npm:@modelcontextprotocol/server-filesystem@2026.8.31"
  "memory|npm:@modelcontextprotocol/server-memory@2026.8.31"
  "sequential-thinking|npm:@modelcontextprotocol/server-sequential-thinking@2026.8.31"
  "github|npm:@modelcontextprotocol/server-github@2025.4.8"
  "gitlab|npm:@modelcontextprotocol/server-gitlab@2025.4.25"
  "slack|npm:@modelcontextprotocol/server-slack@2025.4.25"
  "brave-search|npm:@modelcontextprotocol/server-brave-search@0.6.2"
  "postgres|npm:@modelcontextprotocol/server-postgres@0.6.2"
  "redis|npm:@modelcontextprotocol/server-redis@2025.4.25"
  "puppeteer|npm:@modelcontextprotocol/server-puppeteer@2025.5.12"
  "google-maps|npm:@modelcontextprotocol/server-google-maps@0.6.2"
  "gdrive|npm:@modelcontextprotocol/server-gdrive@2025.1.14"
  "playwright|npm:@playwright/mcp@0.0.83"
  "notion|npm:@notionhq/notion-mcp-server@2.5.2"
  "context7|npm:@upstash/context7-mcp@4.1.1"
  "desktop-commander|npm:@wonderwhy-er/desktop-commander@0.2.52"
  "kubernetes|npm:mcp-server-kubernetes@4.1.7"
  "sentry|npm:@sentry/mcp-server@0.39.0"
  "firecrawl|npm:firecrawl-mcp@3.26.0"
  "git|pypi:mcp-server-git@2026.10.19"
  "fetch|pypi:mcp-server-fetch@2026.10.24"
  "time|pypi:mcp-server-time@2026.10.19"
  "sqlite|pypi:mcp-server-sqlite@2025.4.25"
  "atlassian|pypi:mcp-atlassian@0.23.1"
)

want() {  # is server $1 selected on the command line (or are all)?
  [ $# -ge 1 ] || return 0
  local n="$1"; shift
  [ $# -eq 0 ] && return 0
  local w; for w in "$@"; do [ "$w" = "$n" ] && return 0; done
  return 1
}

spec_of() { local e; for e in "${SERVERS[@]}"; do [ "${e%%|*}" = "$1" ] && { echo "${e#*|}"; return; }; done; }

npm_install() {  # name registry-spec
  local name="$1" pkg="${2#npm:}" d="$S/npm/$1"
  mkdir -p "$d"
  if [ -f "$HERE/locks/npm/$name/package-lock.json" ]; then
    cp "$HERE/locks/npm/$name/package.json" "$HERE/locks/npm/$name/package-lock.json" "$d/"
    (cd "$d" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund >"$S/logs/npm-$name.log" 2>&1)
  else
    [ -f "$d/package.json" ] || echo '{"private":true}' >"$d/package.json"
    (cd "$d" && PUPPETEER_SKIP_DOWNLOAD=1 npm install --ignore-scripts --no-audit --no-fund --save-exact "$pkg" >"$S/logs/npm-$name.log" 2>&1)
  fi
}

venv_install() {  # venv-name lock-file
  local v="$S/venv-$1"
  [ -x "$v/bin/python" ] || "$PY" -m venv "$v"
  "$v/bin/pip" install -q --disable-pip-version-check -r "$HERE/locks/pypi/$2" >"$S/logs/pip-$1.log" 2>&1
}

SPECS=()
PKGS=()
add() { SPECS+=("$1=$2"); PKGS+=(--package "$1=$(spec_of "$1")"); }

# --- npm servers -----------------------------------------------------------
for e in "${SERVERS[@]}"; do
  name="${e%%|*}"; spec="${e#*|}"
  [[ "$spec" == npm:* ]] || continue
  want "$name" "$@" || continue
  echo "installing $name ($spec)" >&2
  npm_install "$name" "$spec"
done
bin() { echo "$S/npm/$1/node_modules/.bin/$2"; }
# PYTHONHASHSEED: mcp-atlassian builds some defaults from Python sets, so
# fix the hash seed to keep their order (and the catalog) reproducible.
E="env HOME=$S/home PYTHONHASHSEED=0"

want everything "$@" && add everything "$E node $S/npm/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio"
want filesystem "$@" && add filesystem "$E $(bin filesystem mcp-server-filesystem) $S/ws"
want memory "$@" && add memory "$E MEMORY_FILE_PATH=$S/memory.jsonl $(bin memory mcp-server-memory)"
want sequential-thinking "$@" && add sequential-thinking "$E $(bin sequential-thinking mcp-server-sequential-thinking)"
want github "$@" && add github "$E GITHUB_PERSONAL_ACCESS_TOKEN=dummy $(bin github mcp-server-github)"
want gitlab "$@" && add gitlab "$E GITLAB_PERSONAL_ACCESS_TOKEN=dummy GITLAB_API_URL=http://127.0.0.1:9/api/v4 $(bin gitlab mcp-server-gitlab)"
want slack "$@" && add slack "$E SLACK_BOT_TOKEN=xoxb-dummy SLACK_TEAM_ID=T00000000 $(bin slack mcp-server-slack)"
want brave-search "$@" && add brave-search "$E BRAVE_API_KEY=dummy $(bin brave-search mcp-server-brave-search)"
want postgres "$@" && add postgres "$E $(bin postgres mcp-server-postgres) postgresql://127.0.0.1:9/db"
want puppeteer "$@" && add puppeteer "$E PUPPETEER_SKIP_DOWNLOAD=1 $(bin puppeteer mcp-server-puppeteer)"
want google-maps "$@" && add google-maps "$E GOOGLE_MAPS_API_KEY=dummy $(bin google-maps mcp-server-google-maps)"
if want gdrive "$@"; then
  echo '{"access_token":"dummy","token_type":"Bearer"}' >"$S/gdrive-credentials.json"
  add gdrive "$E GDRIVE_CREDENTIALS_PATH=$S/gdrive-credentials.json $(bin gdrive mcp-server-gdrive)"
fi
want playwright "$@" && add playwright "$E $(bin playwright playwright-mcp) --headless"
want notion "$@" && add notion "$E NOTION_TOKEN=ntn_dummy $(bin notion notion-mcp-server)"
want context7 "$@" && add context7 "$E $(bin context7 context7-mcp)"
# desktop-commander writes facts about the host into its descriptions (and,
# in a container, the container's mount points): no-container.cjs hides the
# container markers so the catalog shows what a plain Linux host gets.
want desktop-commander "$@" && add desktop-commander "$E node --require $HERE/no-container.cjs $S/npm/desktop-commander/node_modules/@wonderwhy-er/desktop-commander/dist/index.js"
if want kubernetes "$@"; then
  cat >"$S/kubeconfig" <<'YAML'
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://127.0.0.1:9"}
contexts:
- name: local
  context: {cluster: local, user: local}
current-context: local
users:
- name: local
  user: {token: dummy}
YAML
  add kubernetes "$E KUBECONFIG=$S/kubeconfig $(bin kubernetes mcp-server-kubernetes)"
fi
want sentry "$@" && add sentry "$E $(bin sentry sentry-mcp) --access-token=dummy"
want firecrawl "$@" && add firecrawl "$E FIRECRAWL_API_KEY=fc-dummy $(bin firecrawl firecrawl-mcp)"

# --- PyPI servers ----------------------------------------------------------
# mcp-server-git/fetch/time share one venv; mcp-server-sqlite 2025.4.25 does
# not start with mcp 2.x (Server.list_resources is gone), so it gets its own
# venv pinned to mcp 1.x; mcp-atlassian gets its own too.
if want git "$@" || want fetch "$@" || want time "$@"; then
  echo "installing mcp-server-git/fetch/time" >&2
  venv_install reference reference.txt
  if want git "$@"; then
    rm -rf "$S/repo" && git init -q "$S/repo"
    add git "$E $S/venv-reference/bin/mcp-server-git --repository $S/repo"
  fi
  want fetch "$@" && add fetch "$E $S/venv-reference/bin/mcp-server-fetch"
  want time "$@" && add time "$E $S/venv-reference/bin/mcp-server-time --local-timezone UTC"
fi
if want sqlite "$@"; then
  echo "installing mcp-server-sqlite" >&2
  venv_install sqlite sqlite.txt
  add sqlite "$E $S/venv-sqlite/bin/mcp-server-sqlite --db-path $S/bench.db"
fi
if want atlassian "$@"; then
  echo "installing mcp-atlassian" >&2
  venv_install atlassian atlassian.txt
  add atlassian "$E TOOLSETS=all JIRA_URL=http://127.0.0.1:9 JIRA_USERNAME=bench@example.com JIRA_API_TOKEN=dummy CONFLUENCE_URL=http://127.0.0.1:9/wiki CONFLUENCE_USERNAME=bench@example.com CONFLUENCE_API_TOKEN=dummy $S/venv-atlassian/bin/mcp-atlassian"
fi

# --- redis needs a live server to start: run a throwaway one on loopback ----
REDIS_PID=""
cleanup() { [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null || true; }
trap cleanup EXIT
if want redis "$@"; then
  if command -v redis-server >/dev/null; then
    redis-server --port 6399 --bind 127.0.0.1 --save '' --appendonly no >"$S/logs/redis-server.log" 2>&1 &
    REDIS_PID=$!
    sleep 1
    add redis "$E $(bin redis mcp-server-redis) redis://127.0.0.1:6399"
  else
    echo "WARNING: redis-server not found; skipping the redis server" >&2
  fi
fi

[ ${#SPECS[@]} -gt 0 ] || { echo "nothing selected" >&2; exit 1; }
"$PY" "$HERE/collect.py" --out "$OUT" --logs "$S/logs" --timeout 90 "${PKGS[@]}" "${SPECS[@]}"
