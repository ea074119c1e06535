// Count the checks of one conformance-suite server run from its results directory.
//
//   node count.mjs RESULTS_DIR REQUIREMENTS_YAML OUT_DIR
//
// RESULTS_DIR is what the suite wrote with `-o`: one `server-<scenario>-<timestamp>/`
// directory per scenario, each with a `checks.json` (an array of checks with `id` and
// `status`: SUCCESS, FAILURE, WARNING, INFO or SKIPPED). REQUIREMENTS_YAML is the suite's
// own requirements/<rev>.yaml, read to tell scored scenarios (`server:`) from those that are
// run but never scored (`not_scored:`). Writes into OUT_DIR:
//
//   checks.tsv    scenario, check id, status, scored|not-scored; one line per check, sorted
//   passed.txt    `scenario:check-id` of every SUCCESS check, sorted (duplicates kept)
//   counts.json   the counts printed below
//
// and prints one JSON object with the counts on stdout. Run with the Node 22 of the
// conformance install, from whose node_modules the `yaml` package is resolved (see run.sh).

import { readdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const [resultsDir, requirementsYaml, outDir] = process.argv.slice(2);
if (!resultsDir || !requirementsYaml || !outDir) {
  console.error("usage: node count.mjs RESULTS_DIR REQUIREMENTS_YAML OUT_DIR");
  process.exit(2);
}

// `yaml` is a dependency of the conformance suite; resolve it from the suite's install.
const require = createRequire(path.join(path.dirname(requirementsYaml), "..", "package.json"));
const { parse } = require("yaml");
const requirements = parse(readFileSync(requirementsYaml, "utf8"));
const scored = new Set(requirements.server ?? []);

const TIMESTAMP = /-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/;
const rows = [];
for (const entry of readdirSync(resultsDir, { withFileTypes: true })) {
  if (!entry.isDirectory() || !entry.name.startsWith("server-") || !TIMESTAMP.test(entry.name)) continue;
  const scenario = entry.name.slice("server-".length).replace(TIMESTAMP, "");
  const file = path.join(resultsDir, entry.name, "checks.json");
  if (!existsSync(file)) continue;
  for (const check of JSON.parse(readFileSync(file, "utf8"))) {
    rows.push({ scenario, id: String(check.id), status: String(check.status), scored: scored.has(scenario) });
  }
}
rows.sort((a, b) => `${a.scenario}\t${a.id}\t${a.status}`.localeCompare(`${b.scenario}\t${b.id}\t${b.status}`));

const tally = (subset) => {
  const n = (s) => subset.filter((r) => r.status === s).length;
  return {
    total: subset.length,
    passed: n("SUCCESS"),
    failed: n("FAILURE"),
    skipped: n("SKIPPED"),
    other: subset.filter((r) => !["SUCCESS", "FAILURE", "SKIPPED"].includes(r.status)).length,
  };
};
const scenarios = new Set(rows.map((r) => r.scenario));
const counts = {
  scenarios: scenarios.size,
  all: tally(rows),
  scored: tally(rows.filter((r) => r.scored)),
  notScored: tally(rows.filter((r) => !r.scored)),
  failing: rows.filter((r) => r.status === "FAILURE").map((r) => `${r.scenario}:${r.id}${r.scored ? "" : " (not scored)"}`),
};

writeFileSync(
  path.join(outDir, "checks.tsv"),
  rows.map((r) => `${r.scenario}\t${r.id}\t${r.status}\t${r.scored ? "scored" : "not-scored"}\n`).join(""),
);
writeFileSync(
  path.join(outDir, "passed.txt"),
  rows.filter((r) => r.status === "SUCCESS").map((r) => `${r.scenario}:${r.id}\n`).join(""),
);
writeFileSync(path.join(outDir, "counts.json"), JSON.stringify(counts, null, 2) + "\n");
console.log(JSON.stringify(counts));
