//! Stored relations: tuple sets in derivation order, with hash indexes on argument terms.

use super::program::{Path, Program, RelId};
use super::terms::{Interner, TermId};
use hashbrown::HashTable;
use rustc_hash::{FxHashMap, FxHasher};
use std::hash::{Hash, Hasher};

#[derive(Clone, Debug, Default)]
struct Index {
    path: Option<Path>,
    map: FxHashMap<TermId, Vec<u32>>,
}

/// The tuples of one relation, in the order they were derived.
#[derive(Clone, Debug, Default)]
pub(crate) struct Relation {
    arity: usize,
    len: u32,
    flat: Vec<TermId>,
    /// The position of every tuple, hashed by the tuple it names in `flat`, so that a tuple is
    /// stored once (no key of its own to allocate) and looked up by a slice.
    set: HashTable<u32>,
    indexes: Vec<Index>,
}

impl Relation {
    /// An empty relation without indexes.
    pub(crate) fn with_arity(arity: usize) -> Relation {
        Relation {
            arity,
            ..Relation::default()
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    pub(crate) fn tuple(&self, i: usize) -> &[TermId] {
        &self.flat[i * self.arity..(i + 1) * self.arity]
    }

    pub(crate) fn position(&self, tuple: &[TermId]) -> Option<u32> {
        self.set
            .find(hash_tuple(tuple), |&p| self.tuple(p as usize) == tuple)
            .copied()
    }

    pub(crate) fn insert(&mut self, tuple: &[TermId], interner: &Interner) -> bool {
        let pos = self.len;
        let (flat, arity) = (&self.flat, self.arity);
        let at = |p: u32| &flat[p as usize * arity..(p as usize + 1) * arity];
        match self
            .set
            .entry(hash_tuple(tuple), |&p| at(p) == tuple, |&p| hash_tuple(at(p)))
        {
            hashbrown::hash_table::Entry::Occupied(_) => return false,
            hashbrown::hash_table::Entry::Vacant(slot) => {
                slot.insert(pos);
            }
        }
        self.flat.extend_from_slice(tuple);
        self.len += 1;
        for index in &mut self.indexes {
            let Some(path) = index.path else { continue };
            let mut key = tuple[path.arg as usize];
            if let Some(sub) = path.sub {
                match interner.args(key).get(sub as usize) {
                    Some(&k) => key = k,
                    // A tuple without that sub-term can never match a pattern that has it.
                    None => continue,
                }
            }
            index.map.entry(key).or_default().push(pos);
        }
        true
    }

    /// The index on `path`; every index a plan uses is created with the relation, so only an
    /// empty stand-in relation lacks one.
    pub(crate) fn index(&self, path: Path) -> Option<&FxHashMap<TermId, Vec<u32>>> {
        self.indexes.iter().find(|i| i.path == Some(path)).map(|i| &i.map)
    }
}

fn hash_tuple(tuple: &[TermId]) -> u64 {
    let mut h = FxHasher::default();
    tuple.hash(&mut h);
    h.finish()
}

/// The tuples of every relation of one layer.
#[derive(Clone, Debug, Default)]
pub(crate) struct Db {
    rels: Vec<Relation>,
    ready: bool,
}

impl Db {
    pub(crate) fn new(program: &Program) -> Db {
        let rels = program
            .rel_key
            .iter()
            .zip(&program.paths)
            .map(|(&(_, arity), paths)| Relation {
                arity,
                indexes: paths
                    .iter()
                    .map(|&p| Index {
                        path: Some(p),
                        map: FxHashMap::default(),
                    })
                    .collect(),
                ..Relation::default()
            })
            .collect();
        Db { rels, ready: false }
    }

    /// A relation's tuples; a relation this layer does not hold reads as empty.
    pub(crate) fn rel(&self, r: RelId) -> &Relation {
        static EMPTY: std::sync::LazyLock<Relation> = std::sync::LazyLock::new(Relation::default);
        self.rels.get(r as usize).unwrap_or(&EMPTY)
    }

    /// Marks a database of stored relations as complete.
    pub(crate) fn mark_ready(&mut self) {
        self.ready = true;
    }

    /// Whether this database of stored relations is complete.
    pub(crate) fn is_ready(&self) -> bool {
        self.ready
    }

    pub(crate) fn insert(&mut self, r: RelId, tuple: &[TermId], interner: &Interner) -> bool {
        self.rels[r as usize].insert(tuple, interner)
    }
}
