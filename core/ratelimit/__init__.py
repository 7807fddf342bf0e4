"""Rate limits shared by every worker: which limit applies (``limits``, with the operator's rules
checked in ``rules``), where calls are counted (``storage``, with ``leases`` saving Redis round
trips and ``fallback`` counting alone while Redis is away), and the warning when processes count
alone (``processes``)."""
