//! A layered layout of the job graph for the page: sources on the left, sinks on the
//! right, like Flink's web UI. Pure.
//!
//! Layers are longest paths from the sources (a vertex sits one layer right of its
//! furthest input); the order within each layer then follows the barycentre of its
//! neighbours in the layer before (and, sweeping back, after), which removes most edge
//! crossings (Sugiyama's method, its usual heuristic). A graph with a cycle, which a Flink
//! job plan never has, keeps its given order.

/// Where each vertex goes: its layer (column) and its rank within the layer (row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Per vertex (in the given order): (layer, rank).
    pub place: Vec<(usize, usize)>,
    /// Vertices per layer, in rank order (indices into the given vertices).
    pub layers: Vec<Vec<usize>>,
}

/// Sweeps of crossing reduction (down and up count as one).
const SWEEPS: usize = 4;

/// Lays out `n` vertices with `edges` (from, to) as indices.
pub fn layered(n: usize, edges: &[(usize, usize)]) -> Layout {
    let edges: Vec<(usize, usize)> = edges.iter().copied().filter(|&(a, b)| a < n && b < n && a != b).collect();
    let layer = longest_path_layers(n, &edges);
    let depth = layer.iter().copied().max().map_or(0, |m| m + 1);
    let mut layers: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for (v, &l) in layer.iter().enumerate() {
        layers[l].push(v);
    }
    for _ in 0..SWEEPS {
        for l in 1..layers.len() {
            order_by_barycentre(&mut layers, l, l - 1, &edges, true);
        }
        for l in (0..layers.len().saturating_sub(1)).rev() {
            order_by_barycentre(&mut layers, l, l + 1, &edges, false);
        }
    }
    let mut place = vec![(0, 0); n];
    for (l, vs) in layers.iter().enumerate() {
        for (r, &v) in vs.iter().enumerate() {
            place[v] = (l, r);
        }
    }
    Layout { place, layers }
}

/// Layer of each vertex: 0 for sources, else one more than its furthest input. With a
/// cycle (never in a job plan), every vertex is layer 0.
fn longest_path_layers(n: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut indegree = vec![0usize; n];
    for &(_, b) in edges {
        indegree[b] += 1;
    }
    let mut ready: Vec<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
    ready.reverse();
    let mut layer = vec![0usize; n];
    let mut seen = 0;
    while let Some(v) = ready.pop() {
        seen += 1;
        for &(a, b) in edges.iter().filter(|e| e.0 == v) {
            layer[b] = layer[b].max(layer[a] + 1);
            indegree[b] -= 1;
            if indegree[b] == 0 {
                ready.push(b);
            }
        }
    }
    if seen < n { vec![0; n] } else { layer }
}

/// Orders layer `l` by the mean rank of each vertex's neighbours in layer `other`
/// (inputs when `down`, outputs otherwise); vertices without such neighbours keep their
/// place.
fn order_by_barycentre(layers: &mut [Vec<usize>], l: usize, other: usize, edges: &[(usize, usize)], down: bool) {
    let rank_of = |v: usize| layers[other].iter().position(|&x| x == v);
    let mut keyed: Vec<(f64, usize)> = layers[l]
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let ranks: Vec<usize> = edges
                .iter()
                .filter_map(|&(a, b)| {
                    if down && b == v {
                        rank_of(a)
                    } else if !down && a == v {
                        rank_of(b)
                    } else {
                        None
                    }
                })
                .collect();
            let key = if ranks.is_empty() { i as f64 } else { ranks.iter().sum::<usize>() as f64 / ranks.len() as f64 };
            (key, v)
        })
        .collect();
    keyed.sort_by(|x, y| x.0.total_cmp(&y.0));
    layers[l] = keyed.into_iter().map(|(_, v)| v).collect();
}

/// Edge crossings between adjacent layers of a layout (for tests and to judge a layout).
pub fn crossings(layout: &Layout, edges: &[(usize, usize)]) -> usize {
    let mut n = 0;
    for (i, &(a, b)) in edges.iter().enumerate() {
        for &(c, d) in &edges[i + 1..] {
            let (pa, pb, pc, pd) = (layout.place[a], layout.place[b], layout.place[c], layout.place[d]);
            if pa.0 == pc.0
                && pb.0 == pd.0
                && pb.0 == pa.0 + 1
                && (pa.1 as i64 - pc.1 as i64) * (pb.1 as i64 - pd.1 as i64) < 0
            {
                n += 1;
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_is_one_vertex_per_layer_left_to_right() {
        let l = layered(4, &[(0, 1), (1, 2), (2, 3)]);
        assert_eq!(l.place, vec![(0, 0), (1, 0), (2, 0), (3, 0)]);
    }

    #[test]
    fn a_vertex_sits_right_of_its_furthest_input() {
        // 0 → 1 → 2 → 3 and 0 → 3: vertex 3 is on layer 3 (longest path), not 1.
        let l = layered(4, &[(0, 1), (1, 2), (2, 3), (0, 3)]);
        assert_eq!(l.place[3].0, 3);
    }

    #[test]
    fn barycentre_ordering_removes_the_crossing_of_two_parallel_pipelines() {
        // Sources 0 and 1 feed 3 and 2 respectively: in the given order (2 above 3) the two
        // edges cross once; ordered by their inputs' ranks they do not.
        let edges = [(0, 3), (1, 2)];
        let l = layered(4, &edges);
        assert_eq!(crossings(&l, &edges), 0);
        assert_eq!(l.layers[1], vec![3, 2]);
    }

    #[test]
    fn a_cycle_keeps_every_vertex_on_the_first_layer() {
        let l = layered(3, &[(0, 1), (1, 2), (2, 0)]);
        assert!(l.place.iter().all(|p| p.0 == 0));
    }
}
