//! Mixed-domain inputs (SPEC §2.7): an operation runs in its output's
//! domain, and an input that lives elsewhere is an error at submission,
//! unless the caller asks for a transfer ([`Submit::transfer`]). Then the
//! input is first copied, by an ordinary scheduled copy, into a temporary in
//! the output's domain (a temporary comes from a domain plus the default
//! selector, §2.5), and the operation reads the temporary.

use std::borrow::Cow;

use super::copy::copy;
use super::submit::{Completion, Submit};
use crate::domain::Domain;
use crate::error::{Error, Result, Status};
use crate::tensor::handle::Tensor;

/// `inputs`, each in `domain`: the input itself (borrowed: no count taken),
/// or (with `opts.transfer`) a temporary copy of it there.
#[inline]
pub(crate) fn inputs_in<'t, C: Completion, const N: usize>(
    origin: &'static str,
    domain: Domain,
    inputs: [&'t Tensor; N],
    opts: &Submit<'_, C>,
) -> Result<[Cow<'t, Tensor>; N]> {
    if inputs.iter().all(|t| t.domain() == domain) {
        return Ok(inputs.map(Cow::Borrowed));
    }
    let mut out = inputs.map(Cow::Borrowed);
    for (x, t) in out.iter_mut().zip(inputs) {
        if t.domain() != domain {
            *x = Cow::Owned(staged(origin, domain, t, opts)?);
        }
    }
    Ok(out)
}

/// A temporary copy of `t` in `domain` (with `opts.transfer`), or the error
/// for an input in another domain than the output.
#[cold]
fn staged<C: Completion>(origin: &'static str, domain: Domain, t: &Tensor, opts: &Submit<'_, C>) -> Result<Tensor> {
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
    Ok(tmp)
}
