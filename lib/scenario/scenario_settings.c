/* A scenario's recompute and swap settings, queried per layer and printed
 * in their normalised form as MindFormers logs it ("Formative ..."); which
 * ops they reach is the declared-decisions layer's business
 * (lib/policy/declared.c), since that needs the program. */
#include "memory_config.h"

#include <stdio.h>
#include <string.h>

static const ms_memory_config *config_of(const ms_scenario *sc)
{
    return sc != NULL ? sc->memory_config : NULL;
}

bool scn_settings_active(const ms_scenario *sc)
{
    const ms_memory_config *mc = config_of(sc);
    return mc != NULL && (mc->mf || mc->swap || mc->granularity != MC_GRAN_NONE);
}

/* ---- per layer ------------------------------------------------------------ */

static bool megatron_full(const ms_memory_config *mc, int layer)
{
    if (mc->granularity != MC_GRAN_FULL)
        return false;
    if (mc->method == MC_METHOD_UNIFORM)
        return true; /* every group of N layers, each layer recomputed */
    int c, s, local;
    scn_layer_place(mc, layer, &c, &s, &local);
    return local < mc->recompute_num_layers; /* block: the first N of each chunk */
}

bool scn_layer_full(const ms_memory_config *mc, int layer)
{
    return megatron_full(mc, layer) || (mc->mf && scn_layers_has(mc, &mc->full, layer));
}

/* MindFormers: the first rule of a list that covers the layer. */
const mc_swap_rule *scn_rule_for(const ms_memory_config *mc, const mc_swap_rule *rules, int n,
                                  int layer)
{
    for (int i = 0; i < n; i++)
        if (scn_layers_has(mc, &rules[i].on, layer))
            return &rules[i];
    return NULL;
}

ms_status scn_layer_settings(const ms_scenario *sc, int layer, scn_layer_memory *out,
                             ms_diag *d)
{
    const ms_memory_config *mc = config_of(sc);
    if (mc == NULL || out == NULL)
        return ms_diag_set(d, MS_EINVAL, "scn_layer_settings: NULL argument or a scenario "
                           "not loaded from a file");
    if (layer < 0 || layer >= mc->num_layers)
        return ms_diag_set(d, MS_ERANGE, "scn_layer_settings: layer %d outside 0..%d", layer,
                           mc->num_layers - 1);
    memset(out, 0, sizeof *out);
    int local;
    scn_layer_place(mc, layer, &out->chunk, &out->stage, &local);
    out->full_recompute = scn_layer_full(mc, layer);
    out->attention_recompute = mc->granularity == MC_GRAN_SELECTIVE;
    for (int i = 0; !out->full_recompute && mc->mf && i < mc->n_select; i++)
        out->n_select += scn_layers_has(mc, &mc->select[i].on, layer);
    for (int i = 0; !out->full_recompute && mc->mf && i < mc->n_comm; i++)
        out->n_comm += scn_layers_has(mc, &mc->comm[i].on, layer);
    if (!mc->swap)
        return MS_OK;
    const mc_swap_rule *r = scn_rule_for(mc, mc->layer_swap, mc->n_layer_swap, layer);
    out->layer_swap = r != NULL;
    out->layer_swap_prefetch = r != NULL ? r->prefetch : 0;
    for (int i = 0; i < mc->n_op_swap; i++)
        out->n_op_swap +=
            scn_rule_for(mc, mc->op_swap[i].rules, mc->op_swap[i].n_rules, layer) != NULL;
    return MS_OK;
}

/* ---- printing, as MindFormers logs it -------------------------------------- */

/* Python's repr of the normalised value: [[4, 5], [5, 4]], True, [0, 3]. */
static void print_layers(const ms_memory_config *mc, const mc_layers *on, FILE *out)
{
    if (on->counts != NULL) {
        fputc('[', out);
        for (int c = 0; c < mc->v; c++) {
            fputs(c ? ", [" : "[", out);
            for (int s = 0; s < mc->pp; s++)
                fprintf(out, "%s%d", s ? ", " : "", on->counts[c * mc->pp + s]);
            fputc(']', out);
        }
        fputc(']', out);
        return;
    }
    if (on->all) {
        fputs("True", out);
        return;
    }
    fputc('[', out);
    for (int i = 0; i < on->n_index; i++)
        fprintf(out, "%s%d", i ? ", " : "", on->index[i]);
    fputc(']', out);
}

/* Patterns are printed as written ('feed_forward\.mul'), as MindFormers'
 * documentation shows them (Python's repr would double the backslash). */
static void print_selects(const ms_memory_config *mc, const char *what, const mc_select *s,
                          int n, FILE *out)
{
    fprintf(out, "Formative %s: {", what);
    for (int i = 0; i < n; i++) {
        fprintf(out, "%s'%s': ", i ? ", " : "", s[i].re.text);
        print_layers(mc, &s[i].on, out);
    }
    fputs("}\n", out);
}

static void print_rules(const ms_memory_config *mc, const mc_swap_rule *r, int n, FILE *out)
{
    fputc('[', out);
    for (int i = 0; i < n; i++) {
        fprintf(out, "%s{'backward_prefetch': %d, 'layers': ", i ? ", " : "", r[i].prefetch);
        print_layers(mc, &r[i].on, out);
        fputc('}', out);
    }
    fputc(']', out);
}

static void print_formative(const ms_memory_config *mc, FILE *out)
{
    fputs("Formative layer_recompute: ", out);
    print_layers(mc, &mc->full, out);
    fputc('\n', out);
    print_selects(mc, "select_recompute", mc->select, mc->n_select, out);
    print_selects(mc, "select_comm_recompute", mc->comm, mc->n_comm, out);
    if (!mc->swap)
        return;
    fputs("Formative layer swap: ", out);
    print_rules(mc, mc->layer_swap, mc->n_layer_swap, out);
    fputs("\nFormative op swap: {", out);
    for (int i = 0; i < mc->n_op_swap; i++) {
        fprintf(out, "%s'%s': ", i ? ", " : "", mc->op_swap[i].re.text);
        print_rules(mc, mc->op_swap[i].rules, mc->op_swap[i].n_rules, out);
    }
    fputs("}\n", out);
}

static const char *const gran_name[] = {"none", "full", "selective"};
static const char *const method_name[] = {"none", "uniform", "block"};

void scn_settings_print(const ms_scenario *sc, FILE *out)
{
    const ms_memory_config *mc = config_of(sc);
    if (!scn_settings_active(sc))
        return;
    if (mc->granularity != MC_GRAN_NONE)
        fprintf(out, "Megatron recompute: recompute_granularity=%s, recompute_method=%s, "
                     "recompute_num_layers=%d\n", gran_name[mc->granularity],
                method_name[mc->method], mc->recompute_num_layers);
    if (mc->mf)
        print_formative(mc, out);
}
