//! Dense typed indices. Each is a `u32` newtype so that a role can never be passed where a move
//! is expected, and vectors keyed by them stay compact.

use std::fmt;

macro_rules! index_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        pub struct $name(pub u32);

        impl $name {
            /// The index as a `usize`, for indexing vectors keyed by this type.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// Builds the index from a `usize` position. Panics only if the position does not
            /// fit in `u32`, which would mean a table of more than four billion entries.
            #[inline]
            pub fn from_index(i: usize) -> Self {
                Self(u32::try_from(i).expect("index does not fit in u32"))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

index_type!(
    /// A role, numbered in the order of the game's `role` facts.
    RoleIdx
);
index_type!(
    /// A move of one role (an input proposition `(does role action)`), numbered by the machine.
    MoveIdx
);
index_type!(
    /// A base fact (a proposition that `true` can hold of), numbered by the machine.
    FactIdx
);
