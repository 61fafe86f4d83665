// Fit display equations to the column (book/assets/css/reading.css): once MathJax has typeset, a display
// equation wider than its container is set in a smaller font, down to MIN_SCALE; one still too wide scrolls
// inside a visible frame (el-scroll-frame). Wide tables get the same frame. Runs again on resize and before printing.
(function () {
  "use strict";
  const MIN_SCALE = 0.7;
  const PRINT_MIN_SCALE = 0.4; // paper cannot scroll: shrink further (scripts/build_pdf.py calls readingFit with it)
  window.READING_PRINT_MIN_SCALE = PRINT_MIN_SCALE;
  function overflowing(el) { return el.scrollWidth > el.clientWidth + 1; }
  function fit(minScale) {
    document.querySelectorAll('mjx-container[display="true"]').forEach(function (eq) {
      eq.style.fontSize = "";
      eq.classList.remove("el-scroll-frame");
      if (!eq.getClientRects().length || !overflowing(eq)) return;
      const ratio = eq.clientWidth / eq.scrollWidth;
      let scale = Math.max(minScale, Math.floor(ratio * 100) / 100);
      eq.style.fontSize = (100 * scale) + "%";
      while (overflowing(eq) && scale > minScale) {
        scale = Math.max(minScale, scale - 0.05);
        eq.style.fontSize = (100 * scale) + "%";
      }
      if (overflowing(eq)) eq.classList.add("el-scroll-frame");
    });
    document.querySelectorAll(".pst-scrollable-table-container").forEach(function (box) {
      box.classList.toggle("el-scroll-frame", overflowing(box));
    });
  }
  window.readingFit = function (minScale) { fit(minScale || MIN_SCALE); window.readingFitDone = true; };
  function whenTypeset(then, tries) {
    const mj = window.MathJax;
    if (!document.querySelector('script[src*="mathjax"]')) then(); // a page without MathJax: tables only
    else if (mj && mj.startup && mj.startup.promise) mj.startup.promise.then(then);
    else if ((tries || 0) > 300) then(); // MathJax never started: fit what there is
    else setTimeout(function () { whenTypeset(then, (tries || 0) + 1); }, 100);
  }
  let timer = null;
  document.addEventListener("DOMContentLoaded", function () {
    whenTypeset(function () { window.readingFit(MIN_SCALE); });
    window.addEventListener("resize", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { window.readingFit(MIN_SCALE); }, 150);
    });
    // an opened solution or <details> shows equations that had no size while hidden
    document.addEventListener("click", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { window.readingFit(MIN_SCALE); }, 150);
    });
    window.addEventListener("beforeprint", function () { window.readingFit(PRINT_MIN_SCALE); });
  });
})();
