/* The win-condition calculator of the C3 page (SPEC.md section 3.1).
 *
 * The HTML comes from dlmspec_min/plumbing/calculator.py. Each function below mirrors
 * the one of dlmspec_min/ssld/win_condition.py named beside it, operation for operation, so
 * the page computes what the library computes; tests/test_browser.py checks
 * it. Every output cell gets its number in full precision in data-value.
 */
(function () {
  "use strict";

  var KEYS = ["tau_acc", "alpha", "alpha_hi", "gamma", "c", "n_anchors", "delta",
              "n_draft", "n_acc"];

  // numpy.isclose(a, 1.0) with its defaults rtol = 1e-5, atol = 1e-8
  function isCloseToOne(a) {
    return Math.abs(a - 1.0) <= 1e-8 + 1e-5 * 1.0;
  }

  // win_condition.alpha_star: 1 - 1/tau_acc; NaN where the library refuses (tau_acc < 1)
  function alphaStar(tau) {
    if (!(tau >= 1)) {
      return NaN;
    }
    return 1.0 - 1.0 / tau;
  }

  // win_condition.model_a_tokens_per_cost, with the limit gamma + 1 at alpha = 1
  function modelATokensPerCost(alpha, gamma, c) {
    var tokens = isCloseToOne(alpha) ? gamma + 1.0
      : (1 - Math.pow(alpha, gamma + 1)) / (1 - alpha);
    return tokens / (1 + gamma * c);
  }

  // win_condition.model_a_alpha_needed: the same 100-step bisection; NaN if unreachable
  function modelAAlphaNeeded(tau, gamma, c) {
    if (modelATokensPerCost(1.0, gamma, c) <= tau) {
      return NaN;
    }
    var lo = 0.0;
    var hi = 1.0;
    for (var i = 0; i < 100; i++) {
      var mid = (lo + hi) / 2;
      if (modelATokensPerCost(mid, gamma, c) > tau) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
    return hi;
  }

  // win_condition.model_b_alpha_needed
  function modelBAlphaNeeded(nAnchors, delta, nDraft, c) {
    if (nAnchors <= 0 || delta <= 0) {
      return Infinity;
    }
    return (1 + nDraft * c) / (nAnchors * delta);
  }

  // win_condition.model_b_slowdown
  function modelBSlowdown(nAcc, nDraft, c) {
    return 1 + (1 + nDraft * c) / nAcc;
  }

  // win_condition.shortfall: alpha*/alpha; alpha = 0: alpha*/alpha_hi, a lower bound;
  // both 0: unbounded (where the library raises)
  function shortfall(star, alpha, alphaHi) {
    if (alpha > 0) {
      return {value: star / alpha, lowerBound: false, unbounded: false};
    }
    if (alphaHi > 0) {
      return {value: star / alphaHi, lowerBound: true, unbounded: false};
    }
    return {value: Infinity, lowerBound: false, unbounded: true};
  }

  function shown(x) {
    if (Number.isNaN(x)) {
      return "undefined";
    }
    if (!Number.isFinite(x)) {
      return x > 0 ? "\u221e" : "\u2212\u221e";
    }
    var a = Math.abs(x);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) {
      return x.toExponential(3);
    }
    return String(Number(x.toPrecision(5)));
  }

  function put(root, id, value, text, extra) {
    var cell = root.querySelector("#calc-" + id);
    cell.setAttribute("data-value", String(value));
    cell.textContent = text === undefined ? shown(value) : text;
    if (extra) {
      Object.keys(extra).forEach(function (k) {
        cell.setAttribute("data-" + k, String(extra[k]));
      });
    }
  }

  function read(root) {
    var v = {};
    KEYS.forEach(function (k) {
      var s = root.querySelector("#calc-" + k).value;
      v[k] = s.trim() === "" ? NaN : Number(s);
    });
    return v;
  }

  function update(root) {
    var v = read(root);
    var star = alphaStar(v.tau_acc);
    var tokens = modelATokensPerCost(v.alpha, v.gamma, v.c);
    var beats = tokens > v.tau_acc;
    put(root, "a-tokens", tokens);
    put(root, "a-beats", beats, beats ? "yes" : "no");
    put(root, "alpha-star", star,
        Number.isNaN(star) ? "undefined (\u03c4_acc must be \u2265 1)" : undefined);
    var needA = modelAAlphaNeeded(v.tau_acc, v.gamma, v.c);
    put(root, "a-needed", needA, Number.isNaN(needA)
      ? "unreachable: even \u03b1 = 1 gives at most \u03c4_acc" : undefined);
    var needB = modelBAlphaNeeded(v.n_anchors, v.delta, v.n_draft, v.c);
    put(root, "b-needed", needB, needB > 1
      ? shown(needB) + " (unreachable: above 1)" : undefined);
    put(root, "b-slowdown", modelBSlowdown(v.n_acc, v.n_draft, v.c));
    var sf = shortfall(star, v.alpha, v.alpha_hi);
    var text;
    if (sf.unbounded) {
      text = "unbounded (\u03b1 and its upper end are both 0)";
    } else if (sf.lowerBound) {
      text = "at least " + shown(sf.value) + " (\u03b1 = 0: \u03b1*/\u03b1 high)";
    }
    put(root, "shortfall", sf.value, text,
        {"lower-bound": sf.lowerBound, "unbounded": sf.unbounded});
  }

  function fill(root, which) {
    var values = JSON.parse(root.getAttribute("data-" + which));
    KEYS.forEach(function (k) {
      if (values[k] !== null && values[k] !== undefined) {
        root.querySelector("#calc-" + k).value = String(values[k]);
      }
    });
    var source = root.querySelector("#calc-source");
    source.textContent = which === "paper" ? "the paper's values" : "this build's values";
    update(root);
  }

  function init() {
    var roots = document.querySelectorAll(".win-calculator");
    Array.prototype.forEach.call(roots, function (root) {
      Array.prototype.forEach.call(root.querySelectorAll("button[data-values]"),
        function (b) {
          b.addEventListener("click", function () {
            fill(root, b.getAttribute("data-values"));
          });
        });
      root.querySelector("form").addEventListener("input", function () {
        root.querySelector("#calc-source").textContent = "values typed in";
        update(root);
      });
      fill(root, "build");
      root.setAttribute("data-ready", "true");
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
