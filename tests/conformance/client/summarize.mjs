// The verdict step of tests/conformance/auth.sh and client-scenarios.sh: one line per
// scenario run, from what the suite wrote (its checks.json and its console log), and the
// exit status.
//
//   node summarize.mjs SUITE_DIR OUT_DIR SET SCORED [BASELINE]
//
// Environment: CONFORMANCE_SUMMARY_LABEL names the runs in the last line (default: auth);
// CONFORMANCE_WARNINGS_FAIL=1 makes a WARNING check fail its scenario (client-scenarios.sh).
//
// SUITE_DIR  the installed @modelcontextprotocol/conformance (its `yaml` dependency parses BASELINE)
// OUT_DIR    auth.sh's directory for SET: runs.tsv (scenario, log file, results dir, the
//            suite's exit status; one line per run), and where summary.tsv is written
// SET        the label printed (2025-11-25, 2026-07-28, backcompat)
// SCORED     1 when the set's failures make the exit status non-zero, 0 to report only
// BASELINE   optional: the suite's --expected-failures format, `client:` entries
//            `scenario` (the whole scenario is expected to fail) or `scenario:check-id`
//
// A scenario passes when it has no FAILURE check, the client did not time out, and the
// client exited 0 or the scenario allows a client error (the suite's own plain-run rule,
// less warnings: WARNING checks are SHOULDs, which the requirement sets do not score; they
// are shown). A baseline entry that no longer fails is stale and fails the run, as in the suite.
// Exit status: 1 if SCORED and some scenario failed outside the baseline or an entry is stale.

import { readFileSync, readdirSync, existsSync, writeFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const [suiteDir, outDir, set, scoredArg, baselineFile] = process.argv.slice(2);
if (!suiteDir || !outDir || !set || !scoredArg) {
  console.error("usage: node summarize.mjs SUITE_DIR OUT_DIR SET SCORED [BASELINE]");
  process.exit(2);
}
const scored = scoredArg === "1";
const label = process.env.CONFORMANCE_SUMMARY_LABEL || "auth";
const warningsFail = process.env.CONFORMANCE_WARNINGS_FAIL === "1";

// The baseline: scenario -> true (whole scenario) or a Set of check ids.
const baseline = new Map();
if (baselineFile) {
  const { parse } = createRequire(path.resolve(suiteDir, "package.json"))("yaml");
  const doc = parse(readFileSync(baselineFile, "utf8")) ?? {};
  for (const entry of doc.client ?? []) {
    const s = String(entry);
    const at = s.indexOf(":", s.indexOf("/") + 1);
    const [scenario, check] = at < 0 ? [s, null] : [s.slice(0, at), s.slice(at + 1)];
    if (check === null) baseline.set(scenario, true);
    else if (baseline.get(scenario) !== true) baseline.set(scenario, (baseline.get(scenario) ?? new Set()).add(check));
  }
}

function findChecks(dir) {
  if (!existsSync(dir)) return null;
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (name === "checks.json") return p;
    if (statSync(p).isDirectory()) {
      const found = findChecks(p);
      if (found) return found;
    }
  }
  return null;
}

const rows = [];
const runs = readFileSync(path.join(outDir, "runs.tsv"), "utf8").split("\n").filter(Boolean);
for (const line of runs) {
  const [scenario, logFile, resultsDir, suiteRc] = line.split("\t");
  const log = existsSync(logFile) ? readFileSync(logFile, "utf8").replace(/\x1b\[[0-9;]*m/g, "") : "";
  const checksFile = findChecks(resultsDir);
  const checks = checksFile ? JSON.parse(readFileSync(checksFile, "utf8")) : [];
  const n = (s) => checks.filter((c) => c.status === s).length;
  const failing = checks.filter((c) => c.status === "FAILURE").map((c) => c.id);
  const warnings = checks.filter((c) => c.status === "WARNING").map((c) => c.id);
  const exit = Number((log.match(/Client exited with code (-?\d+)/) ?? [, "0"])[1]);
  const timedOut = /Client timed out after \d+ms/.test(log);
  const exitNotAllowed = /CLIENT EXITED WITH ERROR/.test(log);
  const skipped = /SKIPPED: scenario/.test(log);

  const problems = [];
  if (skipped) problems.push("skipped by the suite");
  else if (!checksFile) problems.push(`no checks.json (suite exit status ${suiteRc})`);
  if (failing.length) problems.push(`failed: ${failing.join(", ")}`);
  if (warningsFail && warnings.length) problems.push(`warnings: ${warnings.join(", ")}`);
  if (timedOut) problems.push("the driver timed out");
  else if (exitNotAllowed) problems.push(`the driver exited ${exit} and the scenario allows no client error`);

  let verdict = problems.length ? "FAIL" : "pass";
  const expected = baseline.get(scenario);
  let stale = [];
  if (expected === true) {
    if (verdict === "FAIL") verdict = "xfail";
    else stale.push(scenario);
  } else if (expected) {
    const onlyChecks = !skipped && checksFile && !timedOut && !exitNotAllowed;
    if (verdict === "FAIL" && onlyChecks && failing.every((id) => expected.has(id))) verdict = "xfail";
    stale = [...expected].filter((id) => !failing.includes(id)).map((id) => `${scenario}:${id}`);
  }
  const notes = [];
  if (exit !== 0 && !exitNotAllowed && !timedOut) notes.push(`driver exit ${exit} (allowed)`);
  if (warnings.length && !warningsFail) notes.push(`warnings: ${warnings.join(", ")}`);
  rows.push({ scenario, verdict, problems, notes, stale, logFile,
    counts: `${n("SUCCESS")} passed, ${n("FAILURE")} failed, ${n("WARNING")} warnings` });
}

rows.sort((a, b) => a.scenario.localeCompare(b.scenario));
const width = Math.max(...rows.map((r) => r.scenario.length), 8);
console.log(`\n${set}${scored ? "" : " (not scored)"}:`);
for (const r of rows) {
  const detail = [...r.problems, ...r.notes].join("; ");
  console.log(`  ${r.verdict.padEnd(5)} ${r.scenario.padEnd(width)}  ${r.counts}${detail ? `  (${detail})` : ""}`);
}
const stale = rows.flatMap((r) => r.stale);
for (const s of stale) console.log(`  stale baseline entry (it passes now; remove it): ${s}`);
const bad = rows.filter((r) => r.verdict === "FAIL");
for (const r of bad) console.log(`  log of ${r.scenario}: ${r.logFile}`);
const count = (v) => rows.filter((r) => r.verdict === v).length;
console.log(
  `conformance ${label} ${set}: ${count("pass")} of ${rows.length} scenarios passed` +
    `${count("xfail") ? `, ${count("xfail")} expected failures` : ""}, ${bad.length} failed` +
    `${scored ? "" : " (not scored)"}`,
);
writeFileSync(
  path.join(outDir, "summary.tsv"),
  rows.map((r) => [r.scenario, r.verdict, r.counts, [...r.problems, ...r.notes].join("; ")].join("\t") + "\n").join(""),
);
process.exit(scored && (bad.length > 0 || stale.length > 0) ? 1 : 0);
