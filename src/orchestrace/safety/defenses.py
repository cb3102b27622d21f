"""The defenses a run can switch on, enforced by the runtime's own code.

:class:`Defenses` is ``RunConfig.defenses`` (all off by default). Each field turns on one
mechanism of :class:`~orchestrace.runtime.core.Runtime`:

* ``sign_messages``: every message is signed with its sender's key (HMAC-SHA256 over sender,
  recipient, content, step and data; keys derived from a :class:`RunSecret` and the seed);
  receivers verify, forgeries are rejected and recorded;
* ``capabilities``: a :class:`~orchestrace.safety.policy.CapabilityPolicy` per role;
* ``taint``: content of tools and untrusted agents is labelled and may not drive spawn, stop,
  aggregate or side-effecting tool calls without an endorsement step;
* ``spotlight``: untrusted content is delimited and datamarked in prompts;
* ``aggregation``: ``trust_weighted``, ``trimmed`` or ``quorum`` instead of a plain vote;
* ``detector``: a prompt-injection detector (``"builtin"`` or a local classifier's path).

The mechanisms live in :mod:`orchestrace.runtime.security` (the runtime may not import this
package); this module is their public home.

Example:
    >>> from orchestrace.safety.defenses import Defenses
    >>> Defenses.all().taint, Defenses.none().is_none()
    (True, True)
"""

from __future__ import annotations

from orchestrace.runtime.security import AGGREGATIONS, SECRET_ENV, Defenses, Keyring, RunSecret

__all__ = ["AGGREGATIONS", "SECRET_ENV", "Defenses", "Keyring", "RunSecret"]
