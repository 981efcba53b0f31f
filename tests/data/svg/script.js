var svg, frames, details, searchbtn, unzoombtn, matchedtxt, icbtn, nametype;
var G = null, X, W, Y, D, N = 0, zoomed = -1, term = null, ignorecase = false;
var NS = "http://www.w3.org/2000/svg";
function init(evt) {
	svg = document.documentElement;
	frames = document.getElementById("frames");
	details = document.getElementById("details").firstChild;
	searchbtn = document.getElementById("search");
	unzoombtn = document.getElementById("unzoom");
	matchedtxt = document.getElementById("matched");
	icbtn = document.getElementById("ignorecase");
	nametype = frames.getAttribute("data-nametype") || "";
	// Frame height comes from the stylesheet (SVG 2 geometry property);
	// a viewer without that support gets it as an attribute instead.
	var first = frames.querySelector("rect");
	if (first && first.getBBox().height === 0) {
		var rs = frames.getElementsByTagName("rect");
		for (var k = 0; k < rs.length; k++) rs[k].setAttribute("height", FH);
	}
	frames.addEventListener("click", function (e) {
		var g = frame_of(e.target);
		if (g) { zoom(g._i); save(); }
	});
	frames.addEventListener("mouseover", function (e) {
		var g = frame_of(e.target);
		if (g) details.nodeValue = nametype + " " + title_of(g);
	});
	frames.addEventListener("mouseout", function () { details.nodeValue = " "; });
	unzoombtn.addEventListener("click", function () { unzoom(); save(); });
	searchbtn.addEventListener("click", function () {
		if (term === null) search_prompt(); else { reset_search(); save(); }
	});
	icbtn.addEventListener("click", toggle_ignorecase);
	window.addEventListener("keydown", function (e) {
		if (e.keyCode === 114 || (e.ctrlKey && e.keyCode === 70)) { e.preventDefault(); search_prompt(); }
		else if (e.ctrlKey && e.keyCode === 73) { e.preventDefault(); toggle_ignorecase(); }
		else if (e.keyCode === 27) { unzoom(); reset_search(); save(); }
	}, false);
	restore();
}
// Geometry of every frame, read once, in document (pre-)order.
function load() {
	if (G) return;
	G = Array.prototype.slice.call(frames.children);
	N = G.length;
	X = new Float64Array(N); W = new Float64Array(N); Y = new Float64Array(N); D = new Float64Array(N);
	for (var i = 0; i < N; i++) {
		var r = G[i].children[1];
		G[i]._i = i;
		X[i] = parseFloat(r.getAttribute("x"));
		W[i] = parseFloat(r.getAttribute("width"));
		Y[i] = parseFloat(r.getAttribute("y"));
		D[i] = INV ? Y[i] : -Y[i];  // larger is deeper
	}
}
function frame_of(e) {
	while (e && e.parentNode !== frames) e = e.parentNode;
	if (e) load();
	return e;
}
function title_of(g) { return g.firstElementChild.textContent; }
function name_of(i) {
	var t = title_of(G[i]);
	var k = t.lastIndexOf(" (");
	return k < 0 ? t : t.substring(0, k);
}
// The frame's exact value: the v attribute when the title shows a unit,
// else the count in the title.
function value_of(i) {
	var v = G[i].getAttribute("v");
	if (v !== null) return parseFloat(v);
	var t = title_of(G[i]);
	return parseFloat(t.substring(t.lastIndexOf(" (") + 2).replace(/,/g, ""));
}
function set_frame(i, x, w) {
	var g = G[i], r = g.children[1], t = g.children[2];
	r.setAttribute("x", x.toFixed(1));
	r.setAttribute("width", w.toFixed(1));
	var chars = Math.floor(w / (FS * FW));
	if (chars < 3) { if (t) t.textContent = ""; return; }
	if (!t) {
		t = document.createElementNS(NS, "text");
		g.appendChild(t);
	}
	if (!t.hasAttribute("y")) t.setAttribute("y", (Y[i] + TY).toFixed(1));
	t.setAttribute("x", (x + 3).toFixed(1));
	var name = name_of(i);
	t.textContent = name.length <= chars ? name : name.substring(0, chars - 2) + "..";
}
function zoom(k) {
	load();
	zoomed = k;
	var x0 = X[k], full = svg.width.baseVal.value - 2 * XP, ratio = full / W[k];
	var end = k + 1;
	while (end < N && D[end] > D[k]) end++;
	var anc = new Uint8Array(N), cur = D[k];
	for (var i = k - 1; i >= 0; i--) if (D[i] < cur) { anc[i] = 1; cur = D[i]; }
	for (i = 0; i < N; i++) {
		var c = G[i].classList;
		if (i >= k && i < end) {
			c.remove("hide"); c.remove("parent");
			set_frame(i, XP + (X[i] - x0) * ratio, W[i] * ratio);
		} else if (anc[i]) {
			c.remove("hide"); c.add("parent");
			set_frame(i, XP, full);
		} else {
			c.add("hide");
		}
	}
	unzoombtn.classList.remove("hide");
}
function unzoom() {
	if (zoomed < 0) return;
	zoomed = -1;
	for (var i = 0; i < N; i++) {
		G[i].classList.remove("hide"); G[i].classList.remove("parent");
		set_frame(i, X[i], W[i]);
	}
	unzoombtn.classList.add("hide");
}
function toggle_ignorecase() {
	ignorecase = !ignorecase;
	if (ignorecase) icbtn.classList.add("show"); else icbtn.classList.remove("show");
	if (term !== null) search(term); else save();
}
function search_prompt() {
	var t = prompt("Enter a search term (regexp allowed, eg: ^ext4_)" +
		(ignorecase ? ", ignoring case" : "") + "\nPress Ctrl-i to toggle case sensitivity", term === null ? "" : term);
	if (t === null) return;
	if (t === "") { reset_search(); save(); return; }
	search(t);
}
function reset_search() {
	if (!G) return;
	for (var i = 0; i < N; i++) {
		var r = G[i].children[1];
		if (r._f !== undefined) { r.setAttribute("fill", r._f); r._f = undefined; }
	}
	term = null;
	searchbtn.classList.remove("show");
	searchbtn.firstChild.nodeValue = "Search";
	matchedtxt.classList.add("hide");
}
// Highlights matching frames and sums the values of the outermost ones
// (a match inside a matched frame is already counted by its ancestor).
function search(t) {
	var re;
	try { re = new RegExp(t, ignorecase ? "i" : ""); } catch (e) { alert("Invalid regular expression: " + e.message); return; }
	load();
	reset_search();
	term = t;
	var sum = 0, open = [];
	for (var i = 0; i < N; i++) {
		while (open.length && open[open.length - 1] >= D[i]) open.pop();
		if (!re.test(name_of(i))) continue;
		var r = G[i].children[1];
		r._f = r.getAttribute("fill");
		r.setAttribute("fill", "rgb(230,0,230)");
		if (!open.length) sum += value_of(i);
		open.push(D[i]);
	}
	searchbtn.classList.add("show");
	searchbtn.firstChild.nodeValue = "Reset Search";
	var total = N ? value_of(0) : 0;
	var pct = total > 0 ? 100 * sum / total : 0;
	matchedtxt.classList.remove("hide");
	matchedtxt.firstChild.nodeValue = "Matched: " + (pct === 100 ? "100" : pct.toFixed(2)) + "%";
	save();
}
// Zoom and search live in the URL (?x=&y=&s=&i=) so a link reopens the view.
function save() {
	try {
		var p = new URLSearchParams(location.search);
		["x", "y", "s", "i"].forEach(function (k) { p.delete(k); });
		if (zoomed >= 0) { p.set("x", X[zoomed]); p.set("y", Y[zoomed]); }
		if (term !== null) p.set("s", term);
		if (ignorecase) p.set("i", "1");
		var q = p.toString();
		history.replaceState(null, "", q ? "?" + q : location.pathname);
	} catch (e) {}
}
function restore() {
	var p;
	try { p = new URLSearchParams(location.search); } catch (e) { return; }
	if (p.get("i") === "1") { ignorecase = true; icbtn.classList.add("show"); }
	if (p.has("x") && p.has("y")) {
		load();
		var x = parseFloat(p.get("x")), y = parseFloat(p.get("y"));
		for (var i = 0; i < N; i++) if (X[i] === x && Y[i] === y) { zoom(i); break; }
	}
	if (p.has("s")) search(p.get("s"));
}
