// Run book/assets/js/sudoku_solver.js in node (no browser) for tests/models/test_pretrained.py:
//   node tests/sudoku_solver_node.js <sudoku_solver.js> <weights.js> <name> <request.json>
// request: {boards: [[16 ints], ...], T}; prints [SudokuSolver.run(model, board, T) for each board] as JSON.
const fs = require("fs"), vm = require("vm");
const [solverPath, weightsPath, name, requestPath] = process.argv.slice(2);
const request = JSON.parse(fs.readFileSync(requestPath, "utf8"));
// the smallest DOM the module needs: no solver divs, and a <script> "load" that runs the weights file in place
const ctx = { window: {}, performance, console, atob: (s) => Buffer.from(s, "base64").toString("binary") };
ctx.document = { readyState: "complete", currentScript: null, querySelectorAll: () => [], createElement: () => ({}),
                 head: { append: (s) => { vm.runInContext(fs.readFileSync(weightsPath, "utf8"), ctx); s.onload(); } } };
vm.createContext(ctx);
vm.runInContext(fs.readFileSync(solverPath, "utf8"), ctx);
ctx.window.SudokuSolver.load(name).then((m) => {
  process.stdout.write(JSON.stringify(request.boards.map((b) => ctx.window.SudokuSolver.run(m, b, request.T))));
});
