# Sourced by the bench scripts that run one release daemon with one fixture server
# (`fx`): builds both, makes a scratch directory `$dir` (removed on exit, with any daemon
# still using its config) holding that config, and defines `start_daemon [WRAPPER…]
# BINARY`, which starts the daemon on `$dir/mcpd.sock` (under a wrapper such as valgrind,
# if given; the started process's pid in `$pid`) and waits for the socket.
cargo build --release --locked --bin mcpd --bin mcpd-fixture >&2
dir="$(mktemp -d /tmp/mcpd-bench.XXXXXX)"
trap 'pkill -f "$dir/mcpd.toml" 2>/dev/null || true; rm -rf "$dir"' EXIT
cat > "$dir/mcpd.toml" <<TOML
[daemon]
state_dir = "$dir/state"
[servers.fx]
command = "$PWD/target/release/mcpd-fixture"
args = []
TOML

start_daemon() {
    rm -rf "$dir/state" "$dir/mcpd.sock"
    "$@" serve --config "$dir/mcpd.toml" --socket "$dir/mcpd.sock" > "$dir/daemon.log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do [ -S "$dir/mcpd.sock" ] && return 0; sleep 0.1; done
    echo "the daemon did not start; its log:" >&2; cat "$dir/daemon.log" >&2; exit 1
}
