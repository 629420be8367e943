
set terminal pngcairo size 900,520 font ',10'
set style data histograms
set style fill solid 0.85 border -1
set boxwidth 0.8
set grid ytics
set xtics rotate by -30 noenhanced
set key top right noenhanced
set yrange [0:*]

set output '/work/main/docs/sweep-cpu4/throughput.png'
set title 'Throughput per strategy (4 ranks)'
set ylabel 'tokens / s'
set style histogram clustered
plot '/work/main/docs/sweep-cpu4/plot.dat' using 2:xtic(1) title 'tokens/s' lc rgb '#3b75af'
set output '/work/main/docs/sweep-cpu4/memory.png'
set title 'Memory per rank'
set ylabel 'MiB'
plot '/work/main/docs/sweep-cpu4/plot.dat' using 3:xtic(1) title 'model state (params+grads+optim)' lc rgb '#519e3e', \
     '' using 4 title 'peak' lc rgb '#ef8636'
set output '/work/main/docs/sweep-cpu4/breakdown.png'
set title 'Step time: compute vs exposed communication'
set ylabel 'seconds per step'
set style histogram rowstacked
plot '/work/main/docs/sweep-cpu4/plot.dat' using 5:xtic(1) title 'compute (incl. hidden comm)' lc rgb '#3b75af', \
     '' using 6 title 'exposed communication' lc rgb '#c53a32'
