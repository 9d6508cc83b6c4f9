"""Token ids as text: decoding one sequence, and finding and trimming stop strings.

Shared by the offline ``Engine``, the scheduler, the detokenizer and the server.
"""
