/* exec_floor: a process that does nothing, built twice (dynamically linked against
 * glibc, and -static) so that check_vs_lstopo.py measures in the same run what merely
 * starting a process costs on the machine: no `gdrpeer check` can take less. */
int main(void) { return 0; }
