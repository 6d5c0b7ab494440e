// Sortable tables for the lm-eval-ext leaderboard: click anywhere in a column's header cell to sort by it,
// click again to reverse; from the keyboard, Tab to the header's button and press Enter or Space (the
// button's own click reaches the header cell). The header says the order in aria-sort. Plain JavaScript,
// no library, works from file:// and any static host. A cell's data-value (a number) is what sorts; cells
// without one (no result) always go last.
(function () {
  "use strict";

  function key(cell) {
    if (!cell) { return null; }
    var raw = cell.getAttribute("data-value");
    if (raw === null || raw === "") { return null; }
    var number = Number(raw);
    return isNaN(number) ? raw.toLowerCase() : number;
  }

  function compare(a, b, descending) {
    if (a === null && b === null) { return 0; }
    if (a === null) { return 1; }
    if (b === null) { return -1; }
    var order;
    if (typeof a === "number" && typeof b === "number") {
      order = a - b;
    } else {  // by code point: the same order on every machine, whatever its locale
      order = String(a) < String(b) ? -1 : (String(a) > String(b) ? 1 : 0);
    }
    return descending ? -order : order;
  }

  function sortBy(table, header) {
    var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var column = headers.indexOf(header);
    var descending = header.getAttribute("aria-sort") !== "descending";
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.forEach(function (row, index) { row.setAttribute("data-order", String(index)); });
    rows.sort(function (r1, r2) {
      var order = compare(key(r1.cells[column]), key(r2.cells[column]), descending);
      return order !== 0 ? order : Number(r1.getAttribute("data-order")) - Number(r2.getAttribute("data-order"));
    });
    rows.forEach(function (row) { body.appendChild(row); });
    headers.forEach(function (h) { h.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }

  function init() {
    var tables = document.querySelectorAll("table.sortable");
    Array.prototype.forEach.call(tables, function (table) {
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header) {
        header.addEventListener("click", function () { sortBy(table, header); });
      });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
}());
