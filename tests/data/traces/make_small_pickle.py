#!/usr/bin/env python3
"""Writes small.pickle, the hand-made snapshot test_replay.c reads.

Shaped like torch.cuda.memory._snapshot(): one large 20 MiB segment at S
whose first 4 MiB are free at the end and whose other 16 MiB hold a block
allocated before the trace; device 0's trace frees a pre-trace block at S
(3.5 MiB requested), allocates and frees 2 MiB there, and ends with an
empty_cache() that released a free 2 MiB small-pool segment.  Device 1 has
no events.  Run: python3 make_small_pickle.py (protocol 4, as torch uses).
"""
import pickle

MiB = 1 << 20
S = 0x7F1000000000
SMALL = 0x7F2000000000


def ev(action, addr, size, t):
    return {'action': action, 'addr': addr, 'size': size, 'stream': 0, 'time_us': t,
            'frames': []}


snapshot = {
    'segments': [{
        'device': 0, 'address': S, 'total_size': 20 * MiB, 'allocated_size': 16 * MiB,
        'active_size': 16 * MiB, 'requested_size': 16 * MiB, 'stream': 0,
        'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False,
        'frames': [],
        'blocks': [
            {'address': S, 'size': 4 * MiB, 'requested_size': 0, 'state': 'inactive',
             'frames': []},
            {'address': S + 4 * MiB, 'size': 16 * MiB, 'requested_size': 16 * MiB,
             'state': 'active_allocated', 'frames': []},
        ],
    }],
    'device_traces': [[
        ev('free_requested', S, 3670016, 100),
        ev('free_completed', S, 3670016, 101),
        ev('alloc', S, 2 * MiB, 102),
        ev('free_requested', S, 2 * MiB, 103),
        ev('free_completed', S, 2 * MiB, 104),
        ev('segment_free', SMALL, 2 * MiB, 105),
    ], []],
    'allocator_settings': {
        'PYTORCH_CUDA_ALLOC_CONF': '', 'max_split_size': -1,
        'garbage_collection_threshold': 0.0, 'expandable_segments': False,
        'roundup_power2_divisions': {str(1 << i): 0 for i in range(16)},
    },
}

with open('small.pickle', 'wb') as f:
    pickle.dump(snapshot, f, protocol=4)

# contradict.pickle: the final state holds one free 2 MiB small segment, yet
# the trace's last event allocates in it and nothing frees that block: the
# trace contradicts the segments (test_replay.c expects event 3 named).
bad = {
    'segments': [{
        'device': 0, 'address': SMALL, 'total_size': 2 * MiB, 'allocated_size': 0,
        'active_size': 0, 'requested_size': 0, 'stream': 0, 'segment_type': 'small',
        'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': [],
        'blocks': [{'address': SMALL, 'size': 2 * MiB, 'requested_size': 0,
                    'state': 'inactive', 'frames': []}],
    }],
    'device_traces': [[
        ev('alloc', SMALL, 512, 200),
        ev('free_requested', SMALL, 512, 201),
        ev('free_completed', SMALL, 512, 202),
        ev('alloc', SMALL + 512, 512, 203),
    ]],
}

with open('contradict.pickle', 'wb') as f:
    pickle.dump(bad, f, protocol=4)

# expandable.pickle: expandable segments, a starting state that is not
# empty.  The final mapped range [E, E + 20 MiB) holds a pre-trace 8 MiB
# block; the trace allocates and frees 8 MiB behind it, then empty_cache()
# unmaps the wholly free second page [E + 20 MiB, E + 40 MiB).  So the trace
# began with 40 MiB mapped (test_replay.c).
E = 0x7F3000000000
exp = {
    'segments': [{
        'device': 0, 'address': E, 'total_size': 20 * MiB, 'allocated_size': 8 * MiB,
        'active_size': 8 * MiB, 'requested_size': 8 * MiB, 'stream': 0,
        'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': True,
        'frames': [],
        'blocks': [
            {'address': E, 'size': 8 * MiB, 'requested_size': 8 * MiB,
             'state': 'active_allocated', 'frames': []},
            {'address': E + 8 * MiB, 'size': 12 * MiB, 'requested_size': 0,
             'state': 'inactive', 'frames': []},
        ],
    }],
    'device_traces': [[
        ev('alloc', E + 8 * MiB, 8 * MiB, 300),
        ev('free_requested', E + 8 * MiB, 8 * MiB, 301),
        ev('free_completed', E + 8 * MiB, 8 * MiB, 302),
        ev('segment_unmap', E + 20 * MiB, 20 * MiB, 303),
    ]],
    'allocator_settings': {
        'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True', 'max_split_size': -1,
        'garbage_collection_threshold': 0.0, 'expandable_segments': True,
        'roundup_power2_divisions': {str(1 << i): 0 for i in range(16)},
    },
}

with open('expandable.pickle', 'wb') as f:
    pickle.dump(exp, f, protocol=4)
