#!/usr/bin/perl
# Make model directories with safetensors files over 1 GB, sparse on disk,
# for 11_large_files.sql:
#   sparse_safetensors.pl gap SRC_DIR DST_DIR GAP_BYTES
#     DST_DIR is SRC_DIR's model with GAP_BYTES of zeros before the tensors'
#     data (their offsets moved by as much): a valid file of any size.
#   sparse_safetensors.pl huge DST_DIR BYTES
#     a file whose one tensor has BYTES bytes (of zeros).
use strict;
use warnings;
use JSON::PP;
use File::Copy;

sub write_st {
	my ($path, $header, $size) = @_;
	my $json = JSON::PP->new->canonical->encode($header);
	open(my $f, '>:raw', $path) or die "$path: $!";
	print $f pack('Q<', length($json)), $json;
	truncate($f, 8 + length($json) + $size) or die "truncate: $!";
	return (8 + length($json), $f);
}

my $mode = shift @ARGV;
if ($mode eq 'gap') {
	my ($src, $dst, $gap) = @ARGV;
	mkdir $dst;
	copy("$src/$_", "$dst/$_") or die "$_: $!" for qw(config.json source.spm target.spm vocab.json);
	open(my $in, '<:raw', "$src/model.safetensors") or die $!;
	local $/;
	my $bytes = <$in>;
	my $hlen = unpack('Q<', substr($bytes, 0, 8));
	my $header = decode_json(substr($bytes, 8, $hlen));
	my $data = substr($bytes, 8 + $hlen);
	for my $k (keys %$header) {
		next if $k eq '__metadata__';
		$_ += $gap for @{ $header->{$k}{data_offsets} };
	}
	my ($start, $f) = write_st("$dst/model.safetensors", $header, $gap + length($data));
	seek($f, $start + $gap, 0) or die $!;
	print $f $data;
	close $f;
} elsif ($mode eq 'huge') {
	my ($dst, $size) = @ARGV;
	mkdir $dst;
	my $rows = int($size / 4 / 1024);
	my ($start, $f) = write_st("$dst/model.safetensors",
		{ 'model.shared.weight' => { dtype => 'F32', shape => [$rows, 1024], data_offsets => [0, $rows * 4096] } },
		$rows * 4096);
	close $f;
} else {
	die "usage: $0 gap SRC DST GAP | huge DST BYTES\n";
}
