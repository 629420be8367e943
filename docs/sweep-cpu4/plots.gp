
set terminal pngcairo size 900,520 font ',10'
set style data histograms
set style fill solid 0.85 border -1
set boxwidth 0.8
set grid ytics
set xtics rotate by -30 noenhanced
set key top right noenhanced
set yrange [0:*]

set output 'docs/sweep-cpu4/throughput.png'
set title 'Throughput per strategy (4 ranks)'
set ylabel 'tokens / s'
set style histogram clustered
plot 'docs/sweep-cpu4/plot.dat' using 2:xtic(1) title 'tokens/s' lc rgb '#3b75af'
set output 'docs/sweep-cpu4/memory.png'
set title 'Memory per rank'
set ylabel 'MiB'
plot 'docs/sweep-cpu4/plot.dat' using 3:xtic(1) title 'model state (params+grads+optim)' lc rgb '#519e3e', \
     '' using 4 title 'peak' lc rgb '#ef8636'
set output 'docs/sweep-cpu4/breakdown.png'
set title 'Step time: compute vs exposed communication'
set ylabel 'seconds per step'
set style histogram rowstacked
plot 'docs/sweep-cpu4/plot.dat' using 5:xtic(1) title 'compute (incl. hidden comm)' lc rgb '#3b75af', \
     '' using 6 title 'exposed communication' lc rgb '#c53a32'

set style data lines
set xtics norotate
set yrange [*:*]
set offsets 0, 0, graph 0.05, graph 0.05
set output 'docs/sweep-cpu4/loss.png'
set title 'Loss per step: training (lines), validation (points)'
set xlabel 'step'
set ylabel 'loss'
plot 'docs/sweep-cpu4/loss.dat' index 0 using 1:2 with lines lw 1.5 lc 1 title 'ddp', 'docs/sweep-cpu4/loss.dat' index 1 using 1:2 with lines lw 1.5 lc 2 title 'zero1', 'docs/sweep-cpu4/loss.dat' index 2 using 1:2 with lines lw 1.5 lc 3 title 'zero2', 'docs/sweep-cpu4/loss.dat' index 3 using 1:2 with lines lw 1.5 lc 4 title 'zero3', 'docs/sweep-cpu4/loss.dat' index 4 using 1:2 with lines lw 1.5 lc 5 title 'hybrid-2x2-zero3', 'docs/sweep-cpu4/loss.dat' index 5 using 1:2 with lines lw 1.5 lc 6 title 'hybrid-2x2-zero2'
