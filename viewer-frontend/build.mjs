// Builds the viewer into ../src/orchestrace/viewer/static (committed, shipped in the wheel).
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

const out = new URL("../src/orchestrace/viewer/static/", import.meta.url).pathname;
mkdirSync(out, { recursive: true });
await build({
  entryPoints: ["src/main.js"],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  legalComments: "eof",
  outfile: out + "viewer.js",
  logLevel: "info",
});
await build({ entryPoints: ["src/style.css"], bundle: true, minify: true, outfile: out + "viewer.css", logLevel: "info" });
copyFileSync("src/index.html", out + "index.html");
