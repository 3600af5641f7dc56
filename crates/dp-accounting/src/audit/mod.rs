//! Empirical lower bounds on epsilon from membership guesses on canaries: the one-run bound of
//! Steinke, Nasr and Jagielski ("Privacy Auditing with One (1) Training Run", NeurIPS 2023) and
//! the classic many-run bound from Clopper-Pearson intervals on the false positive and false
//! negative rates. A lower bound is evidence, never a guarantee: it is labelled `empirical`.

pub mod binomial;
pub mod guesses;
pub mod multi_run;
pub mod one_run;
