/* memsim allocator (private): an intrusive red-black tree of blocks.
 *
 * PyTorch keeps free blocks in std::set ordered by (stream, size, address)
 * and unmapped expandable blocks by (stream, address); lookups are
 * lower_bound plus in-order stepping both ways.  This tree gives the same
 * operations in O(log n) with no allocation: the node is the first member
 * of the block.  A key is two words, hi and the block's address: hi packs
 * (stream, size / 512) for the free set and is the stream for the unmapped
 * set; it is computed at insertion (a block is only resized or moved while
 * it is out of every set).  A comparison is two integer compares on one
 * cache line. */
#ifndef MEMSIM_CORE_ALLOCATOR_TREE_H
#define MEMSIM_CORE_ALLOCATOR_TREE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ms_anode {
    struct ms_anode *left;
    struct ms_anode *right;
    struct ms_anode *parent;
    uint64_t hi;
    uint32_t red;
} ms_anode;

typedef struct ms_atree {
    ms_anode *root;
    size_t count;
} ms_atree;

/* Streams ids and sizes the packed key can hold (docs/allocator.md). */
#define MS_ATREE_MAX_STREAM (UINT64_C(1) << 16)
#define MS_ATREE_MAX_SIZE (UINT64_C(1) << 57)

/* hi of the free set: (stream, size) for sizes that are multiples of 512. */
static inline uint64_t ms_atree_size_key(uint64_t stream_id, uint64_t size)
{
    return stream_id << 48 | size >> 9;
}

/* Insert n with n->hi set; (hi, address) must be unique. */
void ms_atree_insert(ms_atree *t, ms_anode *n);
void ms_atree_erase(ms_atree *t, ms_anode *n);
/* The first node with key >= (hi, addr), or NULL. */
ms_anode *ms_atree_lower_bound(const ms_atree *t, uint64_t hi, uint64_t addr);
ms_anode *ms_atree_first(const ms_atree *t);
ms_anode *ms_atree_last(const ms_atree *t);
ms_anode *ms_atree_next(const ms_anode *n);
ms_anode *ms_atree_prev(const ms_anode *n);

#endif
