//! Mixed-domain inputs (SPEC §2.7): an operation runs in its output's
//! domain, and an input that lives elsewhere is an error at submission,
//! unless the caller asks for a transfer ([`Submit::transfer`]). Then the
//! input is first copied, by an ordinary scheduled copy, into a temporary in
//! the output's domain (a temporary comes from a domain plus the default
//! selector, §2.5), and the operation reads the temporary.

use smallvec::SmallVec;

use super::copy::copy;
use super::submit::{Completion, Submit};
use crate::domain::Domain;
use crate::error::{Error, Result, Status};
use crate::tensor::handle::Tensor;

/// `inputs`, each in `domain`: the input itself, or (with `opts.transfer`) a
/// temporary copy of it there.
pub(crate) fn inputs_in<C: Completion>(
    origin: &'static str,
    domain: Domain,
    inputs: &[&Tensor],
    opts: &Submit<'_, C>,
) -> Result<SmallVec<[Tensor; 2]>> {
    let mut out = SmallVec::new();
    for &t in inputs {
        if t.domain() == domain {
            out.push(t.clone());
            continue;
        }
        if !opts.transfer {
            return Err(Error::new(
                Status::DomainMismatch,
                origin,
                format!(
                    "an input lives on {} and the output on {domain}: copy it first (ta_copy), or set \
                     TA_SUBMIT_TRANSFER in the submission's flags",
                    t.domain()
                ),
            ));
        }
        let tmp = Tensor::unconstructed(t.dtype(), domain).map_err(|e| e.with_origin(origin))?;
        copy(&tmp, t, Submit { runtime: opts.runtime, ..Default::default() }.detached())?;
        out.push(tmp);
    }
    Ok(out)
}
