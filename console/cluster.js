// The web console's cluster page, #/cluster (console.js routes to it and
// shows its link in cluster mode only): the nodes, and each shard's epoch,
// primary, replicas, in-sync set and its backups' lag, as GET
// /api/v1/cluster answers (api/admin_http.h), refreshed live. Every node
// serves it; the lag of each shard comes from its primary.
'use strict';

// "0,3" for shard numbers.
function shardList(numbers) {
  return numbers.length > 0 ? numbers.join(',') : '-';
}

function clusterNodesTable(c) {
  const lead = {};
  const back = {};
  for (const s of c.shards) {
    for (const id of s.replicas) {
      const into = id === s.primary ? lead : back;
      (into[id] = into[id] || []).push(s.shard);
    }
  }
  const state = (n) => [n.alive ? 'alive' : 'gone', n.draining ? 'draining' : null]
      .filter((x) => x).join(', ');
  return table('cluster-nodes', [['Node'], ['Address'], ['Zone'], ['State'], ['Controller'],
                                 ['Primary of'], ['Backup of']],
      c.nodes.map((n) => el('tr', {dataset: {node: n.id}},
          cell('id', n.id), cell('address', n.address || '-'), cell('zone', n.zone || '-'),
          cell('state', state(n)), cell('controller', n.controller ? 'yes' : ''),
          cell('primaryOf', shardList(lead[n.id] || [])),
          cell('backupOf', shardList(back[n.id] || [])))),
      'No live node.');
}

function clusterShardsTable(c) {
  const known = new Set(c.lagErrors.map((e) => e.shard));
  return table('cluster-shards', [['Shard', 1], ['Epoch', 1], ['Primary'], ['Replicas'],
                                  ['In sync'], ['Eligible'], ['Last entry', 1]],
      c.shards.map((s) => el('tr', {dataset: {shard: s.shard}},
          cell('shard', s.shard, true), cell('epoch', s.epoch, true),
          cell('primary', s.primary || '(none)'), cell('replicas', s.replicas.join(',')),
          cell('isr', s.isr.join(',')), cell('eligible', s.eligible.join(',') || '-'),
          cell('lastIndex', known.has(s.shard) ? '?' : count(s.lastIndex), true))),
      'No shard yet: the controller creates them once --replication_factor nodes have joined.');
}

function clusterLagTable(c) {
  const rows = [];
  for (const s of c.shards) {
    for (const b of s.lag) {
      rows.push(el('tr', {dataset: {shard: s.shard, node: b.node}},
          cell('shard', s.shard, true), cell('node', b.node),
          cell('appliedIndex', count(b.appliedIndex), true),
          cell('durableIndex', count(b.durableIndex), true),
          cell('lagEntries', count(b.lagEntries), true),
          cell('heard', b.secondsSinceHeard === undefined ? 'never' :
              `${Number(b.secondsSinceHeard).toFixed(1)} s ago`, true),
          cell('inSync', b.inSync ? 'yes' : 'no')));
    }
  }
  return table('cluster-lag', [['Shard', 1], ['Backup'], ['Applied', 1], ['Durable', 1],
                               ['Behind', 1], ['Heard', 1], ['In sync']],
      rows, 'No backup lag known.');
}

function lagErrorList(c) {
  return el('ul', {id: 'lag-errors', class: 'error'}, c.lagErrors.map((e) =>
      el('li', {dataset: {shard: e.shard}}, `Shard ${e.shard}: ${e.message}`)));
}

async function clusterView() {
  const view = $('#view');
  const c = await api('GET', 'cluster');
  if (c.mode !== 'cluster') {
    view.replaceChildren(el('h1', {}, 'Cluster'),
        el('p', {id: 'cluster-single'}, 'This broker runs as a single node (hourglassd ' +
           'without --etcd): there is no cluster to show.'));
    return;
  }
  const summary = (c) => `As node ${c.node} sees it: ${c.nodes.filter((n) => n.alive).length} ` +
      `live nodes, ${c.shards.length} of ${c.shardCount} shards created, controller ` +
      `${c.controller || '(none)'}.`;
  view.replaceChildren(
      el('h1', {}, `Cluster ${c.cluster}`),
      el('p', {id: 'cluster-summary', dataset: {node: c.node}}, summary(c)),
      el('p', {class: 'muted'}, `Live: refreshed every ${REFRESH_MS / 1000} s. A topic's ` +
         'page works from any node: calls about a shard another node leads go to it.'),
      el('h2', {}, 'Nodes'),
      clusterNodesTable(c),
      el('h2', {}, 'Shards'),
      clusterShardsTable(c),
      el('h2', {}, 'Replication lag (from each shard\'s primary)'),
      clusterLagTable(c),
      lagErrorList(c));
  startRefresh(async () => {
    const fresh = await api('GET', 'cluster');
    $('#cluster-summary').textContent = summary(fresh);
    refreshInPlace($('#cluster-nodes'), clusterNodesTable(fresh));
    refreshInPlace($('#cluster-shards'), clusterShardsTable(fresh));
    refreshInPlace($('#cluster-lag'), clusterLagTable(fresh));
    $('#lag-errors').replaceWith(lagErrorList(fresh));
  });
}
