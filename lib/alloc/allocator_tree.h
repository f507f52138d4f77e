/* memsim allocator (private): an intrusive red-black tree of blocks.
 *
 * PyTorch keeps free blocks in std::set ordered by (stream, size, address)
 * and unmapped expandable blocks by (stream, address); lookups are
 * lower_bound plus in-order stepping both ways.  This tree gives the same
 * operations in O(log n) with no allocation: the node is the first member
 * of the block.  A key is two words, hi and the block's address: hi packs
 * (stream, size / 512) for the free set and is the stream for the unmapped
 * set; it is computed at insertion (a block is only resized or moved while
 * it is out of every set, or re-keyed in place where the order allows).  A
 * comparison is one double-word compare on one cache line
 * (alloc_tree_key_before, allocator_internal.h). */
#ifndef MEMSIM_CORE_ALLOCATOR_TREE_H
#define MEMSIM_CORE_ALLOCATOR_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* child[0] is the left (smaller) subtree, child[1] the right: a descent
 * indexes the child by the comparison's outcome instead of branching on it,
 * since the direction taken at each node is data-dependent. */
typedef struct ms_anode {
    struct ms_anode *child[2];
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
static inline uint64_t alloc_tree_size_key(uint64_t stream_id, uint64_t size)
{
    return stream_id << 48 | size >> 9;
}

/* Insert n with n->hi set; (hi, address) must be unique. */
void alloc_tree_insert(ms_atree *t, ms_anode *n);
void alloc_tree_erase(ms_atree *t, ms_anode *n);
/* nw takes old's place in the tree (old leaves it): the caller guarantees
 * that nw's key sorts where old's did. */
void alloc_tree_replace(ms_atree *t, ms_anode *old, ms_anode *nw);
ms_anode *alloc_tree_first(const ms_atree *t);
ms_anode *alloc_tree_last(const ms_atree *t);
ms_anode *alloc_tree_next(const ms_anode *n);
ms_anode *alloc_tree_prev(const ms_anode *n);

/* The first node with key >= (hi, 0), or NULL; every lookup starts at
 * address 0, so only hi is compared. */
static inline ms_anode *alloc_tree_lower_bound(const ms_atree *t, uint64_t hi)
{
    ms_anode *n = t->root;
    ms_anode *best = NULL;
    while (n) {
        bool right = n->hi < hi;
        best = right ? best : n;
        n = n->child[right];
    }
    return best;
}

#endif
