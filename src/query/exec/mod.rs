//! Runs a bound plan ([`run`]), one file per operator: [`seed`],
//! [`scan`], [`traverse`], [`propagate`], [`filter`], [`expand`] and
//! [`linearise`] (selection under the budget is [`crate::query::select`]);
//! [`scope`] says which documents a query reads.

mod expand;
mod filter;
mod linearise;
mod propagate;
mod run;
mod scan;
mod scope;
mod seed;
mod traverse;

pub(crate) use run::execute;
