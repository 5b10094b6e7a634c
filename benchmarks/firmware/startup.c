/* Start-up code for the example program of a `--target c` package on QEMU's MPS2 boards and
 * its MPS3 board mps3-an547 (built with -DMPS3_AN547): the vector table, the copy of .data and
 * the zeroing of .bss, the command line through semihosting (SYS_GET_CMDLINE), the FPU (and
 * Helium, which the same enable bits cover) switched on where the code uses it, and a clock
 * for the example program's DEMO_CLOCK: on the MPS2 boards the CMSDK APB timer 0 at 25 MHz,
 * on mps3-an547 the SSE-300's system counter at 32 MHz. Under QEMU's `-icount shift=0` one
 * instruction takes 1 ns of virtual time, so a tick is 40 instructions (31.25 on mps3-an547).
 * newlib's librdimon does the rest over semihosting (stdio, files, exit). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SYS_WRITE0 0x04
#define SYS_GET_CMDLINE 0x15
#define SYS_EXIT 0x18
#define ADP_STOPPED_RUN_TIME_ERROR 0x20023

#if defined(MPS3_AN547)
#define COUNTER_CNTCR (*(volatile uint32_t *)0x58100000u)   /* the system counter's control frame */
#define COUNTER_CNTCV_LOW (*(volatile uint32_t *)0x58100008u)
#else
#define TIMER0_CTRL (*(volatile uint32_t *)0x40000000u)
#define TIMER0_VALUE (*(volatile uint32_t *)0x40000004u)
#define TIMER0_RELOAD (*(volatile uint32_t *)0x40000008u)
#endif
#define CPACR (*(volatile uint32_t *)0xE000ED88u)

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start__[], __bss_end__[], __stack_top[];
extern void initialise_monitor_handles(void);
extern int main(int argc, char **argv);

void reset_handler(void);
unsigned long mcu_timer_ticks(void);
void _init(void);
void _fini(void);

/* newlib's constructor and destructor hooks (crti.o's, which -nostartfiles leaves out) */
void _init(void)
{
}

void _fini(void)
{
}

static int semihost(int op, void *arg)
{
    register int r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static void fault_handler(void)
{
    semihost(SYS_WRITE0, (void *)"fault: the firmware stopped in an exception handler\n");
    semihost(SYS_EXIT, (void *)ADP_STOPPED_RUN_TIME_ERROR);
    for (;;) {
    }
}

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))__stack_top, reset_handler, fault_handler, fault_handler, fault_handler,
    fault_handler, fault_handler, 0, 0, 0, 0, fault_handler, fault_handler, 0, fault_handler, fault_handler,
};

unsigned long mcu_timer_ticks(void)
{
#if defined(MPS3_AN547)
    return COUNTER_CNTCV_LOW;
#else
    return 0xFFFFFFFFu - TIMER0_VALUE;
#endif
}

static char cmdline[4096];
static char *args[64];

void reset_handler(void)
{
    struct { char *buffer; int length; } request = { cmdline, (int)sizeof cmdline - 1 };
    int argc = 0;
    char *p;
#if defined(__ARM_FP)
    CPACR |= 0xFu << 20;   /* CP10 and CP11: full access to the FPU */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
    memcpy(__data_start, __data_load, (size_t)((char *)__data_end - (char *)__data_start));
    memset(__bss_start__, 0, (size_t)((char *)__bss_end__ - (char *)__bss_start__));
    initialise_monitor_handles();
    if (semihost(SYS_GET_CMDLINE, &request) == 0) {
        cmdline[request.length] = '\0';
        for (p = strtok(cmdline, " "); p != NULL && argc < 63; p = strtok(NULL, " "))
            args[argc++] = p;
    }
    args[argc] = NULL;
#if defined(MPS3_AN547)
    COUNTER_CNTCR = 1u;   /* EN: the counter counts up from 0 */
#else
    TIMER0_RELOAD = 0xFFFFFFFFu;
    TIMER0_VALUE = 0xFFFFFFFFu;
    TIMER0_CTRL = 1u;
#endif
    exit(main(argc, args));
}
