
(function () {
  var root = document.getElementById(ROOT_ID);
  var data = JSON.parse(root.querySelector('script.cpx-data').textContent);
  var cases = data.cases, texts = data.texts;  // a case's messages are indices into texts
  var labels = data.labels || {}, names = data.filter_names || {};  // display names of keys
  function shownAs(v) { return Object.prototype.hasOwnProperty.call(labels, v) ? labels[v] : v; }
  var filters = FILTERS, keys = ['case', 'q', 'correct', 'sample'].concat(FILTERS);
  var pageSize = PAGE_SIZE, shown = pageSize, only = null;  // only: the key of one linked case
  var live = root.querySelector('.cpx-live'), list = live.querySelector('.cpx-list');
  var more = live.querySelector('.cpx-more'), bar = live.querySelector('.cpx-bar');
  var search = live.querySelector('.cpx-search'), correct = live.querySelector('.cpx-correct');
  var sample = live.querySelector('.cpx-sample'), count = live.querySelector('.cpx-count');
  var viewLink = live.querySelector('.cpx-link'), all = live.querySelector('.cpx-all');
  var selects = {};
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  filters.forEach(function (name) {
    var values = [];
    cases.forEach(function (c) { if (values.indexOf(c[name]) < 0) values.push(c[name]); });
    values.sort(function (a, b) { return isNaN(a) || isNaN(b) ? String(a).localeCompare(String(b)) : a - b; });
    var label = el('label', null, (names[name] || name.replace('_', ' ')) + ':'), select = el('select');
    select.name = name;
    select.appendChild(el('option', null, '(all)')).value = '';
    values.forEach(function (v) { select.appendChild(el('option', null, shownAs(v))).value = v; });
    select.addEventListener('change', changed);
    label.appendChild(select);
    bar.insertBefore(label, correct.parentNode);
    selects[name] = select;
  });
  if (!cases.some(function (c) { return c.sampled; })) sample.parentNode.style.display = 'none';
  if (!cases.some(function (c) { return c.kind === 'correct'; })) correct.parentNode.style.display = 'none';
  function state() {
    var p = new URLSearchParams();
    if (only !== null) { p.set('case', only); return p; }
    if (search.value) p.set('q', search.value);
    filters.forEach(function (n) { if (selects[n].value) p.set(n, selects[n].value); });
    if (correct.checked) p.set('correct', '1');
    if (sample.checked) p.set('sample', '1');
    return p;
  }
  function href(p) { return location.href.split('#')[0] + '#' + p.toString(); }
  function changed() {
    only = null; shown = pageSize; render();
    history.replaceState(null, '', '#' + state().toString());
  }
  function apply(hash) {  // the state a link names; a hash that is not ours (a section anchor) is left alone
    var p = new URLSearchParams(hash.replace(/^#/, ''));
    if (!keys.some(function (k) { return p.has(k); })) return false;
    only = p.get('case');
    search.value = p.get('q') || '';
    filters.forEach(function (n) { selects[n].value = p.get(n) || ''; });
    correct.checked = p.get('correct') === '1';
    sample.checked = p.get('sample') === '1';
    shown = pageSize;
    render();
    return true;
  }
  function block(box, title, text, open) {
    var details = box.appendChild(el('details'));
    details.open = !!open;
    details.appendChild(el('summary', null, title));
    details.appendChild(el('pre', 'cpx-text', text === null || text === '' ? '(empty)' : text));
    return details;
  }
  function card(c) {
    var box = el('div', 'cpx-card');
    box.setAttribute('data-case', c.key);
    var head = box.appendChild(el('div', 'cpx-head', c.id + ' '));
    [shownAs(c.condition), shownAs(c.kind), c.template, c.num_variables + ' variables'].concat(c.sampled ? ['App. I sample'] : [])
      .forEach(function (t) { head.appendChild(el('span', 'cpx-tag', t)); });
    var link = head.appendChild(el('a', 'cpx-case-link', 'link to this case'));
    link.href = href(new URLSearchParams({case: c.key}));
    box.appendChild(el('div', null, 'Hypothesis: ' + c.hypothesis));
    box.appendChild(el('div', null, c.verdict));
    if (c.intervention_note) box.appendChild(el('div', null, 'Probe: ' + c.intervention_note));
    var premise = box.appendChild(el('div', 'cpx-premise'));
    premise.appendChild(el('b', null, 'Premise: '));
    premise.appendChild(document.createTextNode(c.premise));
    if (c.flags.length) box.appendChild(el('div', 'cpx-flags', 'Flagged in the object: ' + c.flags.join('; ')));
    var graphs = box.appendChild(el('div', 'cpx-graphs'));
    c.graphs.forEach(function (g) {
      var fig = graphs.appendChild(el('figure'));
      fig.innerHTML = g[1];  // SVG drawn and escaped at build time
      fig.appendChild(el('figcaption', null, g[0]));
    });
    if (c.flow === 'tool') {
      var emitted = block(box, 'Turn 1: the object as emitted (tool-call arguments)',
                          c.turn1_arguments === null ? '(no tool call)' : c.turn1_arguments, true);
      emitted.classList.add('cpx-emitted');
      if (c.emitted_error) emitted.appendChild(el('div', 'cpx-note', 'Not usable: ' + c.emitted_error));
    }
    if (c.flow === 'prose') block(box, 'Turn 1: the prose intermediate', c.turn1_text, true);
    block(box, c.flow === 'one_turn' ? 'The answer (model output, one turn)' : 'Turn 2: the answer (model output)',
          c.answer_text, true);
    var sent = box.appendChild(el('details', 'cpx-messages'));
    sent.appendChild(el('summary', null, 'Messages sent, as cpdagthink prompt prints them'));
    if (c.messages[0] === null) sent.appendChild(el('div', 'cpx-note', 'not rebuilt for this page'));
    c.messages.forEach(function (m, i) {
      if (m === null) return;
      sent.appendChild(el('div', 'cpx-note', 'turn ' + (i + 1)));
      var printed = '[\n' + m.map(function (t) { return texts[t]; }).join(',\n') + '\n]';
      sent.appendChild(el('pre', 'cpx-text', printed));
    });
    if (c.as_recorded === false) sent.appendChild(el('div', 'cpx-note',
      'Rebuilt from the record, but not the request it recorded (made under other settings).'));
    return box;
  }
  function text(c) {
    return [c.premise, c.hypothesis, c.answer_text || '', c.turn1_text || ''].join('\n').toLowerCase();
  }
  function render() {
    var q = search.value.toLowerCase(), kind = selects.kind.value;
    var matching = cases.filter(function (c) {
      if (only !== null) return c.key === only;
      if (c.kind === 'correct' && !correct.checked && kind !== 'correct') return false;
      if (sample.checked && !c.sampled) return false;
      if (q && text(c).indexOf(q) < 0) return false;
      return filters.every(function (name) { var v = selects[name].value; return !v || String(c[name]) === v; });
    });
    count.textContent = (only === null ? matching.length + ' of ' + cases.length + ' cases' : matching.length ?
      'one linked case' : 'the linked case is not in this run (show every case to see the others)') +
      (matching.length > shown ? ' (first ' + shown + ' shown)' : '');
    viewLink.href = href(state());
    all.style.display = only !== null ? '' : 'none';
    list.textContent = '';
    matching.slice(0, shown).forEach(function (c) { list.appendChild(card(c)); });
    more.style.display = matching.length > shown ? '' : 'none';
    more.textContent = 'show ' + Math.min(pageSize, matching.length - shown) + ' more';
  }
  search.addEventListener('input', changed);
  correct.addEventListener('change', changed);
  sample.addEventListener('change', changed);
  all.addEventListener('click', changed);
  more.addEventListener('click', function () { shown += pageSize; render(); });
  window.addEventListener('hashchange', function () { apply(location.hash); });
  if (!apply(location.hash)) render();
})();
