"""The engine's sampling layer: pure torch over a batch of logits.

NOTE: nothing is imported here: ``sampling.params`` and ``sampling.errors`` need no torch and
the HTTP and detokenizer processes import them (through ``ipc``) without it; the modules
that use torch are imported by name where they are used.

Scheduler wiring, per request: `params = SamplingParams.from_dict(d); params.validate(V)`;
at admission `state = RequestPenaltyState.for_request(params, prompt_ids, V, device)`.
Per step: `info = SamplingBatchInfo.from_params(params_list, device, V, output_lens)`,
`out = Sampler().sample(logits, info, penalty_states=states, return_logprob=...,
top_logprobs_nums=...)`, then `cumulate_batch(states, out.next_token_ids)`.
"""
